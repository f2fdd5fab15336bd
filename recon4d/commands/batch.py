"""`recon4d batch --inputs PATH --out DIR`: fit many videos as Ray tasks, resumably.

Without ``--ray-address`` a local Ray instance is started on this machine; with
``--ray-address auto`` (or HOST:PORT) the scenes go to an existing cluster (README,
"Scaling"). ``batch.json`` in ``--out`` records every scene; re-running skips complete
scenes. The fit schedule is the same as ``recon4d fit``'s: ``--preset`` plus any
``--config.*`` override.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import tyro

from recon4d.commands._args import option_value
from recon4d.errors import UserError, expected_errors
from recon4d.fit.trainer import FitConfig
from recon4d.priors.options import PriorOptions
from vqa_bridge.adapters import ModelName


@dataclass
class BatchCommand:
    inputs: Path
    """A folder of videos / DAVIS sequences / synth scenes, a DAVIS root, or a .txt/.csv list."""
    out: Path = Path("out")
    """Parent folder of the scene folders and batch.json (on a shared file system for a cluster)."""
    ray_address: str | None = None
    """Existing cluster: 'auto' (this node belongs to it) or HOST:PORT. Default: a local instance."""
    num_cpus: int | None = None
    """CPUs of the local instance (default: all); ignored with --ray-address."""
    gpus_per_scene: float | None = None
    """GPUs per scene task (default: 1 when the cluster has GPUs, else 0)."""
    cpus_per_scene: float = 1.0
    retries: int = 2
    """Ray task retries of a failing scene before it is marked failed."""
    preset: str = "auto"
    """configs/fit_<preset>.toml: cpu-preview, davis, quality, test; auto = davis on a GPU, cpu-preview without."""
    priors: Literal["auto", "gt"] = "auto"
    """gt: exact priors from `recon4d synth` scenes' ground truth."""
    teacher: tuple[str, ...] = ()
    """Feature teachers to distil in every scene (built in: patch)."""
    vlm: ModelName | None = None
    """Also distil this VLM's vision encoder in every scene (what the feature-field VQA needs)."""
    vlm_path: str | None = None
    """Local checkpoint directory (or hub id) of --vlm, for the real models."""
    priors_options: tyro.conf.OmitArgPrefixes[PriorOptions] = field(default_factory=PriorOptions)
    """Frames and priors of every scene, as in `recon4d fit`: --max-frames, --long-side, --depth-model ..."""
    config: FitConfig = field(default_factory=FitConfig)


@expected_errors("batch")
def main(argv: list[str]) -> int:
    from recon4d.batch.inputs import discover
    from recon4d.batch.runner import BatchOptions, run_batch
    from recon4d.fit.presets import AUTO_PRESETS

    if not {"-h", "--help"} & set(argv) and not option_value(argv, "--inputs", ""):
        raise UserError("--inputs is required (a folder of videos or sequences, or a .txt/.csv list)")
    preset = option_value(argv, "--preset", "auto")
    cmd = _parse(argv, AUTO_PRESETS["cpu"] if preset == "auto" else preset)
    # "auto" is for each worker's machine to decide, not this one's: both configs go out, the worker picks
    on_gpu = _parse(argv, AUTO_PRESETS["gpu"]) if preset == "auto" else None
    specs = discover(cmd.inputs)
    opts = BatchOptions(out=cmd.out, config=cmd.config, priors=cmd.priors, teachers=cmd.teacher,
                        retries=cmd.retries, gpus_per_scene=cmd.gpus_per_scene, cpus_per_scene=cmd.cpus_per_scene,
                        ray_address=cmd.ray_address, num_cpus=cmd.num_cpus, vlm=cmd.vlm, vlm_path=cmd.vlm_path,
                        prior_options=cmd.priors_options,
                        config_on_gpu=on_gpu.config if on_gpu else None,
                        prior_options_on_gpu=on_gpu.priors_options if on_gpu else None)
    manifest = run_batch(specs, opts)
    failed = [name for name in (s.name for s in specs) if manifest.scenes[name].status != "done"]
    return 1 if failed else 0


def _parse(argv: list[str], preset: str) -> BatchCommand:
    """The command line over ``preset``'s fit config (``--config.*`` options override it)."""
    from recon4d.fit.presets import load_preset, preset_prior_options

    try:
        base, options = load_preset(preset), preset_prior_options(preset)
    except ValueError as exc:  # an unknown preset, or a preset file with an unknown setting
        raise UserError(str(exc)) from exc
    return tyro.cli(BatchCommand, args=argv, prog="recon4d batch",
                    default=BatchCommand(inputs=Path("."), config=base, priors_options=options))
