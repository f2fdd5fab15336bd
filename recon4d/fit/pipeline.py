"""``recon4d fit`` end to end: preprocessing (priors), teachers, optimisation, preview, metrics.

Every step reads and writes only the scene folder, so a re-run (or ``--resume``) picks
up where the folder says the last run stopped.
"""

from __future__ import annotations

import dataclasses
import json
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import torch

from cuda_ext.ssim import ssim_mean
from recon4d.device import check_gpu_path, resolve_device
from recon4d.errors import UserError
from recon4d.fit.cameras import still_camera
from recon4d.fit.preview import write_preview
from recon4d.fit.trainer import FitConfig, fit_scene
from recon4d.io.atomic import write_json
from recon4d.priors.options import PreprocessConfig, PriorOptions
from recon4d.priors.pipeline import run_preprocess
from recon4d.render import rasterize
from recon4d.render.metrics import psnr
from recon4d.scene.data import load_scene_data
from recon4d.scene.model import LATENT_START, RGB
from recon4d.scene_folder import SceneFolder, Stage


@dataclass
class FitJob:
    scene_dir: Path
    source: Path
    config: FitConfig = field(default_factory=FitConfig)
    priors: Literal["auto", "gt"] = "auto"
    teachers: tuple[str, ...] = ()
    stop_after: Stage | None = None
    resume: bool = False
    options: PriorOptions = field(default_factory=PriorOptions)
    """Frame and prior options (used when the scene folder has no priors yet)."""


def _log_to(scene_dir: Path):
    scene_dir.mkdir(parents=True, exist_ok=True)
    log_file = SceneFolder(scene_dir).log

    def log(msg: str) -> None:
        print(msg, flush=True)
        with open(log_file, "a") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {msg}\n")

    return log


def ensure_priors(job: FitJob, log) -> None:
    if SceneFolder(job.scene_dir).has_priors():
        if job.options != PriorOptions():
            log(f"priors: {SceneFolder(job.scene_dir).priors} exists and is reused; the frame and prior options given "
                f"apply to a new scene folder only (another --name, or delete priors/)")
        return
    if job.priors == "gt":
        from recon4d.synth.gt_priors import write_gt_priors

        log(f"priors: exact ground truth from {job.source}")
        if job.options != PriorOptions():
            log("priors: the frame and prior options do not apply to exact ground-truth priors (all frames)")
        write_gt_priors(job.source, job.scene_dir)
        return
    cfg = PreprocessConfig(video=job.source, **dataclasses.asdict(job.options))
    try:
        run_preprocess(cfg, job.scene_dir, log=log)
    except UserError as exc:  # name the scene and the stage: in a batch the line is all one sees
        exc.args = (f"{job.scene_dir.name}: priors: {exc}",)
        raise


def ensure_teachers(job: FitJob, log) -> None:
    from recon4d.fit.teachers import patch_teacher
    from recon4d.scene.teachers import write_teacher

    folder = SceneFolder(job.scene_dir)
    for name in job.teachers:
        if folder.teacher(name).exists():
            continue
        if name != "patch":
            raise UserError(f"teacher {name!r} is not cached in {folder.teachers}; extract it with "
                             f"`recon4d vqa extract` first (built-in teacher: patch)")
        data = load_scene_data(job.scene_dir)
        features = patch_teacher(data.images)
        write_teacher(job.scene_dir, name, features)
        log(f"teacher {name}: {tuple(features.shape[1:])} tokens per frame")


@torch.no_grad()
def training_scores(scene, data, backend: str = "auto") -> tuple[list[float], list[float]]:
    """PSNR and SSIM of every input-camera render against its frame (SSIM: 11-px Gaussian window,
    the usual evaluation setting, on the same map the loss uses)."""
    psnrs, ssims = [], []
    for t in range(data.frames):
        rgb = rasterize(*scene.at(t).as_args(), data.viewmats[t:t + 1], data.K[None], data.width,
                        data.height, backend=backend).features[0, ..., RGB].clamp(0, 1)
        psnrs.append(float(psnr(rgb, data.images[t])))
        ssims.append(float(ssim_mean(rgb, data.images[t], window=11)))
    return psnrs, ssims


def _split_scores(psnrs: list[float], ssims: list[float], frames: list[int], name: str) -> dict[str, float]:
    """Mean PSNR, worst PSNR and mean SSIM over ``frames`` (the fitted ones, or the held-out ones)."""
    return {f"psnr_{name}": sum(psnrs[t] for t in frames) / len(frames), f"psnr_{name}_min": min(psnrs[t] for t in frames),
            f"ssim_{name}": sum(ssims[t] for t in frames) / len(frames)}


def peak_memory_mib() -> dict[str, float]:
    """This process's peak resident memory (Linux reports KiB) and, on a GPU, PyTorch's peak allocation."""
    peak = {"peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if torch.cuda.is_available():
        peak["peak_cuda_mib"] = torch.cuda.max_memory_allocated() / 2**20
    return peak


def run_fit(job: FitJob) -> dict:
    log = _log_to(job.scene_dir)
    started = time.perf_counter()
    if job.stop_after != "priors":  # a GPU that cannot run the fit says so before the priors, not after
        check_gpu_path(resolve_device(job.config.device), job.config.backend)
    ensure_priors(job, log)
    priors_seconds = time.perf_counter() - started
    if job.stop_after == "priors":
        return {"stage": "priors"}
    ensure_teachers(job, log)
    data = load_scene_data(job.scene_dir, cameras="priors")  # the fit learns its corrections on these
    log(f"fit: {data.frames} frames at {data.width}x{data.height}, teachers: {sorted(data.teachers) or 'none'}")
    config = job.config
    still = still_camera(SceneFolder(job.scene_dir).camera, data.width)
    if job.priors == "gt" or still:  # exact cameras, or still ones: a refinement could only drift away
        if still:
            log(f"fit: {still}")
        config = dataclasses.replace(config, camera_lr=0.0)
    trainer = fit_scene(data, config, SceneFolder(job.scene_dir).model, resume=job.resume, log=log,
                        stop_after=job.stop_after)
    scene = trainer.scene  # scored and previewed where it was fitted (the GPU's rasterizer on a GPU)
    with torch.no_grad():
        data = dataclasses.replace(trainer.data, viewmats=trainer.poses(trainer.data.viewmats))
    psnrs, ssims = training_scores(scene, data, config.backend)
    mid = data.frames // 2
    with torch.no_grad():
        out = rasterize(*scene.at(mid).as_args(), data.viewmats[mid:mid + 1], data.K[None], data.width, data.height,
                        backend=config.backend)
    write_preview(SceneFolder(job.scene_dir).preview, *(x.cpu() for x in (
        data.images[mid], out.features[0, ..., RGB], out.depth[0, ..., 0], out.alpha[0, ..., 0],
        out.features[0, ..., LATENT_START:])))
    metrics_path = SceneFolder(job.scene_dir).metrics
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    for stale in ("psnr_heldout", "psnr_heldout_min", "ssim_heldout"):  # from a fit with other held-out frames
        metrics.pop(stale, None)
    metrics.update({**_split_scores(psnrs, ssims, trainer.train_frames, "train"),
                    **(_split_scores(psnrs, ssims, sorted(trainer.held_out), "heldout") if trainer.held_out else {}),
                    "heldout_frames": sorted(trainer.held_out), "psnr_per_frame": psnrs, "ssim_per_frame": ssims,
                    "stage": trainer.stage, "n_gaussians": trainer.n_gaussians(),
                    "n_static": len(scene.static), "n_dynamic": len(scene.dynamic), "n_nodes": len(scene.scaffold),
                    "stage_seconds": {"priors": priors_seconds, **trainer.stage_seconds},
                    "fit_seconds": time.perf_counter() - started, **peak_memory_mib()})
    write_json(metrics_path, metrics)
    _summary(job.scene_dir, metrics, log)
    return metrics


def _summary(scene_dir: Path, metrics: dict, log) -> None:
    """The last lines a user reads: how good, how long, and where everything is."""
    minutes, seconds = divmod(round(metrics["fit_seconds"]), 60)
    ended = "done" if metrics["stage"] == "done" else f"stopped before the {metrics['stage']} stage"
    held = f"held-out frames {metrics['psnr_heldout']:.2f} dB; " if "psnr_heldout" in metrics else ""
    log(f"{ended} in {minutes} min {seconds:02d} s: training-view PSNR {metrics['psnr_train']:.2f} dB "
        f"(worst frame {metrics['psnr_train_min']:.2f}), SSIM {metrics['ssim_train']:.3f}; {held}"
        f"{metrics['n_gaussians']} Gaussians, {metrics['n_nodes']} nodes, peak memory {metrics['peak_rss_mib']:.0f} MiB")
    log(f"  scene folder: {scene_dir}  (model/scene.safetensors, metrics.json, log.txt)")
    log(f"  side by side: {SceneFolder(scene_dir).preview}  (input | render | depth | feature PCA)")


__all__ = ["FitJob", "run_fit"]
