"""The export job: ``<scene>/export/`` with static.ply, dynamic/<frame>.ply and transforms.json.

Per-frame dynamic files hold the dynamic Gaussians moved to that frame (skinned
means and rotations, latents blended from the scaffold nodes), so a plain splat
viewer shows frame t by loading static.ply together with dynamic/<t>.ply.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from recon4d.export.ply import Splats, write_ply
from recon4d.export.transforms import write_transforms
from recon4d.render.fitted import load_fitted
from recon4d.render.video import parse_frames
from recon4d.scene import DynamicScene


@dataclass
class ExportJob:
    scene: Path
    frames: str = ":"
    """Frames whose dynamic part is written: a slice (`0:24:4`) or a comma list (`0,12`)."""
    latents: bool = True
    """Also store the feature-field latents as extra `latent_*` properties (viewers ignore them)."""
    out: Path | None = None
    """Output folder (default <scene>/export)."""


def static_splats(scene: DynamicScene) -> Splats:
    st = scene.static
    return Splats(st.means, st.quats, st.scales, st.opacities, st.colors, st.latents)


@torch.no_grad()
def dynamic_splats(scene: DynamicScene, t: int) -> Splats:
    """The dynamic Gaussians at frame t (the same skinning ``DynamicScene.at`` does)."""
    dy = scene.dynamic
    if len(dy) == 0:
        return Splats(*(torch.zeros(0, n) for n in (3, 4, 3)), torch.zeros(0), torch.zeros(0, 3),
                      torch.zeros(0, scene.latent_dim))
    means, quats = scene.binding.deform(dy.means, dy.quats, scene.scaffold, t, scene.skin_mode)
    return Splats(means, quats, dy.scales, dy.opacities, dy.colors, scene.dynamic_latents())


def run_export(job: ExportJob, log=print) -> dict:
    fitted = load_fitted(job.scene, device="cpu")  # PLY and JSON are written from host memory
    scene, data = fitted.scene, fitted.data
    out = Path(job.out) if job.out else fitted.folder / "export"
    times = parse_frames(job.frames, data.frames)
    static_path = write_ply(out / "static.ply", static_splats(scene), job.latents)
    dynamic = [write_ply(out / "dynamic" / f"{t:05d}.ply", dynamic_splats(scene, t), job.latents) for t in times]
    frame_files = sorted((fitted.folder / "frames").glob("*.jpg")) or sorted((fitted.folder / "frames").glob("*.png"))
    transforms = write_transforms(out / "transforms.json", data.K, data.viewmats, data.width, data.height,
                                  frame_files, ply_file=static_path)
    log(f"export: {static_path} ({len(scene.static)} static Gaussians), {len(dynamic)} dynamic frames "
        f"({len(scene.dynamic)} Gaussians each) in {out / 'dynamic'}, {transforms}")
    return {"static": static_path, "dynamic": dynamic, "transforms": transforms}
