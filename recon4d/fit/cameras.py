"""Photometric camera refinement: a small pose correction per frame, learned with the Gaussians.

Why: the priors' bundle adjustment works on sparse tracks and can leave pixels
of reprojection error on real video; static Gaussians then average several
misaligned views into a blur. Letting the photometric loss nudge each camera (as
gsplat's ``pose_opt`` and the reference systems' camera stage do) removes that
blur. Where the solved cameras are already good (0.4 px on DAVIS blackswan) a
large rate only adds noise, hence the small default in ``FitConfig.camera_lr``. The correction is left-multiplied
in camera coordinates, ``view_t' = exp(delta_t) @ view_t``, and the first frame
is held fixed while the Gaussians are fitted, so that the world frame (the priors
put camera 0 at the origin; the scale, the global camera and any ground-truth
alignment follow from it) stays where it was. Once the Gaussians hold the world
(the ``cameras`` stage aligns each frame against fixed Gaussians), frame 0 is
aligned like the others (``release_first``): held fixed, an error of the solve in
the first camera stayed in the fit (docs/decisions.md). That stage ends each frame with
direct alignment steps (:func:`align_camera`), which take out what its gradient steps leave.

The refined cameras are written to ``model/cameras.json``; ``load_scene_data``
(:mod:`recon4d.scene.data`) reads them instead of the priors' for every command that uses a finished fit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import torch
from torch import Tensor, nn

from recon4d.geometry import log_rotation, rodrigues_torch
from recon4d.io.atomic import write_json
from recon4d.render import RenderOutput
from recon4d.render.alignment import camera_twist
from recon4d.scene.data import SceneData
from recon4d.scene.model import RGB
from recon4d.scene.scaffold import between_seen


# A camera whose still tracks move, over the whole clip (median of each track's largest move), by less than this
# share of the image's width is still: the DAVIS clips split at 0.2% (breakdance, drift-chicane) against 2% and up.
STILL_CAMERA_SHARE = 0.01


def still_camera(camera_file: Path, width: int) -> str | None:
    """Why the priors' cameras are to be kept unrefined (the tracks show them still), or None.

    Why: a still camera has no motion left for the photometric refinement to find, only the scene's to
    absorb. On DAVIS breakdance (a dancer before a swaying crowd, tracks moving 0.9 px over the clip) the
    refinement turned the cameras by 0.18 degrees (4 px at its focal) and smeared the building behind:
    static PSNR 17.2 dB, 23.2 without it (docs/decisions.md).
    """
    if not Path(camera_file).is_file():
        return None
    camera = json.loads(Path(camera_file).read_text())
    moved = camera.get("info", {}).get("median_track_motion_px")
    if camera.get("motion_type") != "static" and (moved is None or moved >= STILL_CAMERA_SHARE * width):
        return None
    how = "" if moved is None else f" (its tracks move {moved:.2f} px over the clip)"
    return f"the priors' camera is still{how}: its poses are kept, not refined"


class PoseRefinement(nn.Module):
    """Per-frame axis-angle + translation corrections ``[T, 6]``, zero at the start."""

    def __init__(self, frames: int):
        super().__init__()
        self.delta = nn.Parameter(torch.zeros(frames, 6))
        free = torch.ones(frames, 1)
        free[0] = 0.0
        self.register_buffer("free", free)

    def release_first(self) -> None:
        """Let frame 0's correction act (and learn) from now on; saved with the corrections."""
        self.free[0] = 1.0

    def forward(self, viewmats: Tensor) -> Tensor:
        """Refined world-to-camera matrices ``[T, 4, 4]`` for the given frames' ``viewmats``."""
        return self.apply_to(viewmats, torch.arange(len(viewmats), device=viewmats.device))

    def apply_to(self, viewmats: Tensor, frames: Tensor) -> Tensor:
        d = self.delta[frames] * self.free[frames]
        correction = torch.eye(4, device=viewmats.device, dtype=viewmats.dtype).repeat(len(frames), 1, 1)
        correction[:, :3, :3] = rodrigues_torch(d[:, :3].to(viewmats.dtype))
        correction[:, :3, 3] = d[:, 3:].to(viewmats.dtype)
        return correction @ viewmats

    @torch.no_grad()
    def compose(self, t: int, twist: Tensor) -> None:
        """Move frame ``t``'s camera by ``twist = (omega, v)`` (axis-angle and translation, camera coordinates)
        on top of its correction, ``view_t' = [R(omega) | v] @ exp(delta_t) @ view_t``, written into ``delta_t``."""
        if not self.free[t] > 0:
            raise ValueError(f"frame {t}'s correction is held fixed")
        delta, twist = self.delta[t].detach().double().cpu(), twist.detach().double().cpu()
        rot = rodrigues_torch(twist[None, :3])[0]
        moved = rot @ rodrigues_torch(delta[None, :3])[0]
        self.delta[t, :3] = torch.from_numpy(log_rotation(moved.numpy()[None])[0]).to(self.delta)
        self.delta[t, 3:] = (rot @ delta[3:] + twist[3:]).to(self.delta)

    @torch.no_grad()
    def interpolate(self, frames: frozenset[int]) -> None:
        """Give each of ``frames`` (frames the fit never saw) the correction linearly interpolated between its
        nearest seen neighbours', or the nearest one's at the ends: a camera's drift is smooth in time."""
        for t, before, after, w in between_seen(frames, len(self.delta)):
            self.delta[t] = (1 - w) * self.delta[before] + w * self.delta[after]

    def save(self, path: Path, K: Tensor, base_viewmats: Tensor, checkpoint: str) -> None:
        """Write the corrections and the refined cameras to ``path``, tagged with the ``checkpoint`` they belong to."""
        with torch.no_grad():
            refined = self(base_viewmats)
        write_json(path, {
            "K": K.cpu().tolist(), "viewmats": refined.cpu().tolist(),
            "delta": self.delta.detach().cpu().tolist(), "first_free": bool(self.free[0] > 0), "checkpoint": checkpoint,
            "why": "the priors' cameras (priors/camera.json) after photometric refinement during the fit",
        })

    def load(self, path: Path) -> None:
        """Read the corrections saved at ``path`` (none there: keep zero)."""
        if path.exists():
            saved = json.loads(path.read_text())
            delta = torch.tensor(saved["delta"], dtype=self.delta.dtype)
            with torch.no_grad():
                self.delta.copy_(delta.to(self.delta.device))
            if saved.get("first_free"):
                self.release_first()


@torch.no_grad()
def align_camera(poses: PoseRefinement, t: int, data: SceneData, render: Callable[[], RenderOutput], steps: int) -> None:
    """Move frame ``t``'s camera by ``steps`` direct alignment steps (:func:`~recon4d.render.alignment.camera_twist`
    of its render's background, ``render()`` at the current correction, onto the frame), keeping each only
    when the render after it matches the background better.

    Why: per-frame gradient steps on the pose stop short of the frame (noisy gradients at a rate small enough
    not to jitter), while a Gauss-Newton step on the same photometric error, with the rendered depth,
    measures the remainder directly; the check keeps a step the linearisation got wrong from costing anything."""
    image, background = data.images[t], ~data.dynamic_mask[t]
    if not background.any():
        return

    def rendered() -> tuple[RenderOutput, Tensor]:
        out = render()
        return out, ((out.features[0, ..., RGB] - image) ** 2)[background].mean()

    out, error = rendered()
    for _ in range(steps):
        kept = poses.delta[t].clone()
        poses.compose(t, camera_twist(out.features[0, ..., RGB], out.depth[0, ..., 0], image, background, data.K))
        moved, moved_error = rendered()
        if not moved_error < error:
            poses.delta[t] = kept
            return
        out, error = moved, moved_error
