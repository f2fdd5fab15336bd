"""The render job: a fitted scene along a camera path -> videos, raw feature maps, cameras.

Writes ``<scene>/renders/<path>/``:
  rgb.mp4, depth.mp4 (inverse depth, turbo), features_pca.mp4 (3-component PCA of the latent)
  features.safetensors  latent [N,H,W,L], depth/alpha [N,H,W], frames [N], viewmats, Ks and,
                        per ``decode`` teacher, ``decoded.<name>`` [N,h,w,C] at that teacher's
                        token grid (what the VQA bridge consumes, e.g. [8,16,16,1408])
  cameras.json          the cameras used, per rendered frame; its summary holds the horizontal FoV and
                        the covered fraction (share of pixels with alpha > 0.5: mean and worst frame),
                        which says whether a view shows the scene or mostly empty space

Why frame by frame into ``.partial/``: a long render on a CPU can be killed; each finished
frame is kept (atomically) under a key of the job's settings and the model file, so a
re-run continues where it stopped and a changed setting never mixes in stale frames.
The depth and PCA colourings are computed over all frames at once so the videos do not
flicker (one depth range, one PCA basis).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm import tqdm

from recon4d.io.atomic import atomic_path, write_json
from recon4d.io.video import write_video
from recon4d.render.cameras import CameraPath, PathOptions, camera_path, coverage
from recon4d.render.colorize import colorize_depth, feature_pca
from recon4d.render.fitted import FittedScene, load_fitted
from recon4d.render.metrics import psnr
from recon4d.render.rasterize import rasterize
from recon4d.scene.heads import to_grid
from recon4d.scene.model import LATENT_START, RGB
from recon4d.scene_folder import SceneFolder

OUTPUTS = ("rgb.mp4", "depth.mp4", "features_pca.mp4", "features.safetensors", "cameras.json")


@dataclass
class RenderJob:
    scene: Path
    path: str = "global"
    frames: str = ":"
    """Scene frames to render: a slice (`0:24:2`, `::4`) or a comma list (`0,5,9`)."""
    scale: float = 1.0
    """Resolution relative to the scene's working resolution (rounded to even sizes for mp4)."""
    decode: tuple[str, ...] = ()
    """Teacher heads to decode the latent with, at the teacher's token grid (e.g. internvideo2)."""
    cameras: PathOptions = field(default_factory=PathOptions)
    out: Path | None = None
    """Output folder (default <scene>/renders/<path>)."""
    force: bool = False
    """Render again even when the outputs exist."""
    device: str = "auto"
    """auto (CUDA when available, gsplat backend), cpu, cuda, cuda:N."""


def parse_frames(spec: str, count: int) -> list[int]:
    """``"a:b:c"`` slice or ``"i,j,k"`` list of frame indices in 0..count-1."""
    spec = spec.strip()
    if ":" in spec:
        parts = [int(p) if p.strip() else None for p in spec.split(":")]
        if len(parts) > 3:
            raise ValueError(f"bad frame slice {spec!r}")
        frames = list(range(count))[slice(*parts)]
    else:
        frames = [int(p) for p in spec.split(",") if p.strip()]
        bad = [f for f in frames if not 0 <= f < count]
        if bad:
            raise ValueError(f"frames {bad} are outside the scene's 0..{count - 1}")
    if not frames:
        raise ValueError(f"--frames {spec!r} selects no frame of {count}")
    return frames


def _even(x: float) -> int:
    return max(2, int(round(x / 2)) * 2)


def horizontal_fov(K: torch.Tensor, width: int) -> float:
    return math.degrees(2 * math.atan(width / 2 / float(K[0, 0])))


def _job_key(job: RenderJob, fitted: FittedScene, cams: CameraPath) -> str:
    """Hash of everything a rendered frame depends on (settings, cameras, the model file)."""
    model = SceneFolder(fitted.folder).model_tensors
    stat = model.stat()
    blob = json.dumps({"job": {k: v for k, v in asdict(job).items() if k not in ("force", "out", "scene")},
                       "model": [stat.st_size, stat.st_mtime_ns],
                       "viewmats": cams.viewmats.tolist(), "Ks": cams.Ks.tolist(),
                       "size": [cams.width, cams.height]}, default=str, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


@torch.no_grad()
def render_frame(fitted: FittedScene, cams: CameraPath, i: int, decode: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """Maps of the i-th camera of ``cams``: rgb [H,W,3], depth, alpha [H,W], latent [H,W,L], decoded.*."""
    t, device = cams.times[i], fitted.scene.static.means.device
    out = rasterize(*fitted.scene.at(t).as_args(), cams.viewmats[i:i + 1].to(device), cams.Ks[i:i + 1].to(device),
                    cams.width, cams.height)
    feats = out.features[0]
    maps = {"rgb": feats[..., RGB].clamp(0, 1), "depth": out.depth[0, ..., 0], "alpha": out.alpha[0, ..., 0],
            "latent": feats[..., LATENT_START:]}
    for name in decode:
        h, w = fitted.data.teachers[name].shape[1:3]
        maps[f"decoded.{name}"] = fitted.heads[name](to_grid(maps["latent"], h, w))
    return {k: v.cpu().contiguous() for k, v in maps.items()}


def _check_decode(fitted: FittedScene, decode: tuple[str, ...]) -> None:
    missing = [name for name in decode if name not in fitted.heads]
    if missing:
        have = ", ".join(fitted.heads) or "none (the fit had no teachers)"
        raise ValueError(f"no decoder head for {', '.join(missing)}; this scene has: {have}")
    no_grid = [name for name in decode if name not in fitted.data.teachers]
    if no_grid:  # the token grid comes from the cached teacher maps
        raise ValueError(f"priors/teachers/{no_grid[0]}.safetensors is missing; re-extract it with "
                         f"`recon4d vqa extract` to decode at its token grid")


def run_render(job: RenderJob, log=print) -> dict:
    """Render ``job``; returns a summary (output folder, frames, and for `input` the PSNR vs the frames)."""
    fitted = load_fitted(job.scene, job.device)
    _check_decode(fitted, job.decode)
    data = fitted.data
    times = parse_frames(job.frames, data.frames)
    cams = camera_path(job.path, fitted.scene, data, times, job.cameras)
    cams = cams.resized(_even(data.width * job.scale), _even(data.height * job.scale))
    out_dir = Path(job.out) if job.out else SceneFolder(fitted.folder).renders(job.path)
    key = _job_key(job, fitted, cams)
    done = out_dir / "cameras.json"
    if not job.force and all((out_dir / f).exists() for f in OUTPUTS) and \
            json.loads(done.read_text()).get("key") == key:
        log(f"render: {out_dir} is up to date (use --force to render again)")
        return json.loads(done.read_text())["summary"]

    partial = out_dir / ".partial"
    if (partial / "key.txt").exists() and (partial / "key.txt").read_text() != key:
        shutil.rmtree(partial)  # settings changed: old frames are not this job's
    partial.mkdir(parents=True, exist_ok=True)
    (partial / "key.txt").write_text(key)
    todo = [i for i in range(len(times)) if not (partial / f"{i:05d}.safetensors").exists()]
    if len(todo) < len(times):
        log(f"render: resuming, {len(times) - len(todo)} of {len(times)} frames already rendered")
    for i in tqdm(todo, desc=f"render {job.path}", unit="frame", dynamic_ncols=True,
                  mininterval=0.5 if sys.stderr.isatty() else 30.0):
        with atomic_path(partial / f"{i:05d}.safetensors") as tmp:
            save_file(render_frame(fitted, cams, i, job.decode), str(tmp))

    frames = [load_file(str(partial / f"{i:05d}.safetensors")) for i in range(len(times))]
    stack = {k: torch.stack([f[k] for f in frames]) for k in frames[0]}
    covered = [coverage(a) for a in stack["alpha"]]
    summary = {"out": str(out_dir), "path": job.path, "frames": len(times), "width": cams.width,
               "height": cams.height, "fov_deg": horizontal_fov(cams.Ks[0], cams.width),
               "coverage": sum(covered) / len(covered), "coverage_min": min(covered)}
    if job.path == "input" and job.scale == 1.0:
        scores = [float(psnr(stack["rgb"][i], data.images[t])) for i, t in enumerate(times)]
        summary["psnr"] = sum(scores) / len(scores)
    _write_outputs(out_dir, stack, cams, fitted.fps, summary, key)
    shutil.rmtree(partial)
    return summary


def _write_outputs(out_dir: Path, stack: dict[str, torch.Tensor], cams: CameraPath, fps: float,
                   summary: dict, key: str) -> None:
    N, H, W = stack["depth"].shape
    to8 = lambda x: (x.numpy() * 255 + 0.5).astype(np.uint8)  # noqa: E731
    rate = max(1, round(fps))
    write_video(out_dir / "rgb.mp4", (to8(x) for x in stack["rgb"]), rate)
    # One colour scale / PCA basis for the whole clip: colour the frames stacked as one tall image.
    depth_rgb = colorize_depth(stack["depth"].reshape(N * H, W), stack["alpha"].reshape(N * H, W))
    write_video(out_dir / "depth.mp4", depth_rgb.reshape(N, H, W, 3), rate)
    latent = stack["latent"]
    pca_rgb = feature_pca(latent.reshape(N * H, W, latent.shape[-1]))
    write_video(out_dir / "features_pca.mp4", pca_rgb.reshape(N, H, W, 3), rate)
    tensors = {k: v for k, v in stack.items() if k != "rgb"}
    tensors.update(frames=torch.tensor(cams.times), viewmats=cams.viewmats.contiguous(), Ks=cams.Ks.contiguous())
    with atomic_path(out_dir / "features.safetensors") as tmp:
        save_file(tensors, str(tmp), metadata={"latent_layout": "[frame, y, x, channel]", "path": summary["path"]})
    write_json(out_dir / "cameras.json", {
        "convention": "OpenCV; viewmat = world-to-camera; K in pixels",
        "width": W, "height": H, "fps": fps, "key": key, "summary": summary,
        "frames": [{"t": t, "viewmat": cams.viewmats[i].tolist(), "K": cams.Ks[i].tolist()}
                   for i, t in enumerate(cams.times)],
    })
