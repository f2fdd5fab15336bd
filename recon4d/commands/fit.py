"""`recon4d fit --video PATH`: a video in, a 4D feature field out, in one command.

Runs preprocessing (frames + priors), then the staged optimisation, into
``<out>/<name>/`` (layout in docs/design.md). Re-running resumes from what the
folder holds; ``--stop-after`` ends after a stage. Presets live in configs/fit_*.toml;
every FitConfig field can be overridden on the command line (``--config.steps.joint 3000``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import tyro

from recon4d.commands._args import option_value
from recon4d.errors import UserError, expected_errors, log_tracebacks_to
from recon4d.fit.trainer import FitConfig
from recon4d.priors.options import PriorOptions
from recon4d.scene_folder import SceneFolder, Stage


@dataclass
class FitCommand:
    video: Path
    """Input: an mp4/mov/avi/webm, a folder of frames, a DAVIS sequence folder, or a `recon4d synth` scene."""
    out: Path = Path("out")
    """Parent folder of the scene folder."""
    name: str | None = None
    """Scene folder name (default: the input's name)."""
    preset: str = "auto"
    """configs/fit_<preset>.toml: cpu-preview, davis, quality, test; auto = davis on a GPU, cpu-preview without."""
    priors: Literal["auto", "gt"] = "auto"
    """gt: exact priors from a `recon4d synth` scene's ground truth (isolates the optimiser)."""
    teacher: tuple[str, ...] = ()
    """Feature teachers to distil (cached in priors/teachers/; built in: patch)."""
    stop_after: Stage | None = None
    resume: bool = False
    """Continue from the checkpoint in <scene>/model (the default when the folder holds one, unless --stop-after is given)."""
    priors_options: tyro.conf.OmitArgPrefixes[PriorOptions] = field(default_factory=PriorOptions)
    """Frames and priors (read when the scene folder has none yet): --fov-deg, --depth, --max-frames ..."""
    config: FitConfig = field(default_factory=FitConfig)


@expected_errors("fit")
def main(argv: list[str]) -> int:
    from recon4d.fit.pipeline import FitJob, run_fit
    from recon4d.fit.presets import preset_prior_options, resolve_preset

    preset = option_value(argv, "--preset", "auto")
    try:
        base, options = resolve_preset(preset), preset_prior_options(preset)
    except ValueError as exc:  # an unknown preset, or a preset file with an unknown setting
        raise UserError(str(exc)) from exc
    defaults = FitCommand(video=Path("."), config=base, priors_options=options)
    cmd = tyro.cli(FitCommand, args=argv, default=dataclasses.replace(defaults), prog="recon4d fit")
    if not cmd.video.exists():
        raise UserError(f"input {cmd.video} does not exist")
    name = cmd.name or (cmd.video.stem if cmd.video.is_file() else cmd.video.resolve().name)
    job = FitJob(scene_dir=cmd.out / name, source=cmd.video, config=cmd.config, priors=cmd.priors,
                 teachers=cmd.teacher, stop_after=cmd.stop_after, resume=cmd.resume, options=cmd.priors_options)
    folder = SceneFolder(job.scene_dir)
    log_tracebacks_to(folder.log)
    if not cmd.resume and folder.has_fit() and cmd.stop_after is None:
        job.resume = True  # the folder is a cache: re-running continues (use a new --name to refit)
    metrics = run_fit(job)
    if metrics["stage"] == "priors":
        print(f"priors: {folder.priors} (report.json says how good they are); "
              f"run the same command without --stop-after to fit")
    return 0
