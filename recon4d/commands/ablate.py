"""`recon4d ablate --qa FILE --videos DIR --out DIR`: the whole feature-field VQA experiment.

For every scene a VLM4D question file refers to: fit it (through `recon4d batch`, with
the VLM's vision encoder as a distilled teacher), render the global view, answer every
question from the raw video, the global-view video and the feature field in both prompt
modes, then write ablation.md / .csv / .png beside <out>/vqa/results.jsonl. Re-running
continues where the last run stopped.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import tyro

from recon4d.commands._args import option_value
from recon4d.errors import UserError, expected_errors
from recon4d.fit.trainer import FitConfig
from recon4d.priors.options import PriorOptions
from vqa_bridge.adapters import DtypeName, ModelName
from vqa_bridge.modalities import MODALITIES, Modality


@dataclass
class AblateCommand:
    qa: Path
    """VLM4D-format question file (e.g. ../shared/data/vlm4d/vlm4d_real_mc_davis.json)."""
    videos: Path
    """Where the questions' inputs are: <scene>/ folders (DAVIS sequences, synth scenes), <scene>.mp4, or a DAVIS root."""
    out: Path = Path("ablation")
    """scenes/ (fits + batch.json) and vqa/ (results.jsonl, summary.*, ablation.*)."""
    model: ModelName = "tiny"
    model_path: str | None = None
    device: str = "auto"
    """Where the VLM runs and the global view and feature field render: auto (the GPU when there is one), cpu,
    cuda, cuda:N; recorded in every result and the table. The fits' teacher extraction runs on each worker's own
    device."""
    dtype: DtypeName = "auto"
    """The VLM's dtype: auto = bfloat16 on CUDA, float32 on the CPU."""
    modalities: tuple[Modality, ...] = MODALITIES
    """`raw+cues`: raw frames with the fitted trajectories described in the prompt; `geometric`: the geometric
    answerer's reply (no VLM), scored beside the others."""
    prompt: tuple[Literal["cot", "do"], ...] = ("cot", "do")
    n_frames: int = 8
    max_new_tokens_cot: int = 512
    max_new_tokens_do: int = 16
    preset: str = "auto"
    """Fit preset (configs/fit_<preset>.toml); auto = davis on a GPU, cpu-preview otherwise."""
    priors: Literal["auto", "gt"] = "auto"
    ray_address: str | None = None
    num_cpus: int | None = None
    gpus_per_scene: float | None = None
    cpus_per_scene: float = 1.0
    retries: int = 2
    priors_options: tyro.conf.OmitArgPrefixes[PriorOptions] = field(default_factory=PriorOptions)
    """Frames and priors of every scene, as in `recon4d fit`: --max-frames, --long-side, --depth-model ..."""
    config: FitConfig = field(default_factory=FitConfig)


@expected_errors("ablate")
def main(argv: list[str]) -> int:
    from recon4d.ablate.run import AblationPlan, run_ablation
    from recon4d.batch.runner import BatchOptions
    from recon4d.fit.presets import resolve_preset
    from vqa_bridge.adapters import resolve_placement

    missing = [o for o in ("--qa", "--videos") if not option_value(argv, o, "")]
    if missing and not {"-h", "--help"} & set(argv):
        raise UserError(f"{' and '.join(missing)} required (see --help)")
    try:
        base = resolve_preset(option_value(argv, "--preset", "auto"))
    except ValueError as exc:  # an unknown preset, or a preset file with an unknown setting
        raise UserError(str(exc)) from exc
    cmd = tyro.cli(AblateCommand, args=argv, prog="recon4d ablate",
                   default=dataclasses.replace(AblateCommand(qa=Path("."), videos=Path("."), config=base)))
    if not cmd.qa.is_file() or not cmd.videos.is_dir():
        raise UserError(f"--qa must be a question file and --videos a folder ({cmd.qa}, {cmd.videos})")
    resolve_placement(cmd.device, cmd.dtype)  # a --device this machine lacks fails now, not after the fits
    batch = BatchOptions(out=cmd.out / "scenes", config=cmd.config, priors=cmd.priors, retries=cmd.retries,
                         gpus_per_scene=cmd.gpus_per_scene, cpus_per_scene=cmd.cpus_per_scene,
                         ray_address=cmd.ray_address, num_cpus=cmd.num_cpus, prior_options=cmd.priors_options)
    plan = AblationPlan(qa=cmd.qa, videos=cmd.videos, out=cmd.out, batch=batch, model=cmd.model,
                        model_path=cmd.model_path, device=cmd.device, dtype=cmd.dtype, modalities=cmd.modalities,
                        prompt_modes=cmd.prompt, n_frames=cmd.n_frames,
                        max_new_tokens=(cmd.max_new_tokens_cot, cmd.max_new_tokens_do))
    try:
        files = run_ablation(plan)
    except (ValueError, RuntimeError) as exc:  # a bad question file, an adapter that cannot load, nothing answered
        raise UserError(str(exc)) from exc
    print(files["md"].read_text())
    print("written: " + ", ".join(str(p) for p in files.values()))
    return 0
