"""Camera paths for rendering a fitted scene: input, global, orbit, birdseye, fixed.

All paths are built from the scene's own cameras and geometry, so they work on any
fitted folder. The global view is placed as docs/design.md (Feature4X) places it:
render frame T//2, read the expected depth d at its centre pixel, put one camera
``back``·d behind and ``up``·d above that frame's camera, looking at the point at depth
d on its optical axis, used for every timestep (``global_camera``).

Its field of view is where the default departs from Feature4X. Feature4X uses 70°;
a DAVIS clip is filmed at about 30°, so from that spot the reconstruction (which
only holds what the input camera saw) fills about a quarter of a 70° frame, the
rest black, and that is what the ``global-video`` VLM would be shown. By default
(``global_framing="fill"``) the FoV narrows, from the same position and direction,
until the rendered content fills the frame (``fill_fov``); ``"feature4x"`` keeps
the 70° frame.

"Above" needs an up direction. Synthetic scenes know gravity (their priors record
``world_up``); a solved monocular camera does not, and there "above" means the
middle frame camera's own up (-y in OpenCV), which is what a viewer of the video
would call up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from recon4d.render.rasterize import rasterize
from recon4d.scene import DynamicScene
from recon4d.scene.data import SceneData

PATHS = ("input", "global", "orbit", "birdseye", "fixed")


@dataclass
class CameraPath:
    """One camera per rendered frame; ``times`` are the scene frames shown (time keeps moving)."""

    viewmats: Tensor  # [N,4,4] world-to-camera, OpenCV
    Ks: Tensor  # [N,3,3]
    times: list[int]
    width: int
    height: int

    def resized(self, width: int, height: int) -> "CameraPath":
        """The same cameras at another resolution (intrinsics scaled per axis)."""
        Ks = self.Ks.clone()
        Ks[:, 0] *= width / self.width
        Ks[:, 1] *= height / self.height
        return CameraPath(self.viewmats, Ks, self.times, width, height)


def look_at(eye: Tensor, target: Tensor, up: Tensor) -> Tensor:
    """World-to-camera 4x4 (OpenCV) at ``eye`` looking at ``target``; ``up`` points to the image top."""
    forward = F.normalize(target - eye, dim=0)
    right = torch.linalg.cross(forward, up)
    if right.norm() < 1e-8:
        raise ValueError("camera looks along its up direction; look_at is undefined")
    right = F.normalize(right, dim=0)
    down = torch.linalg.cross(forward, right)
    view = torch.eye(4)
    view[:3, :3] = torch.stack([right, down, forward])
    view[:3, 3] = -view[:3, :3] @ eye
    return view


def intrinsics(fov_deg: float, width: int, height: int) -> Tensor:
    """Pinhole K: square pixels, principal point at the image centre, horizontal FoV in degrees."""
    f = 0.5 * width / math.tan(math.radians(fov_deg) / 2)
    return torch.tensor([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])


def camera_centre(viewmat: Tensor) -> Tensor:
    return -viewmat[:3, :3].T @ viewmat[:3, 3]


def up_direction(data: SceneData, viewmat: Tensor) -> Tensor:
    """Gravity-up when the priors know it, else this camera's own up (-y axis in world)."""
    if data.world_up is not None:
        return F.normalize(data.world_up.float(), dim=0)
    return -viewmat[1, :3]


@torch.no_grad()
def centre_depth(scene: DynamicScene, data: SceneData, frame: int) -> float:
    """Expected depth at the centre pixel of frame ``frame`` rendered from its own camera.

    Where the centre pixel is empty (alpha < 0.5) the median rendered depth is used instead,
    so a sky pixel cannot put the camera at infinity.
    """
    device = scene.static.means.device  # the scene may be on the GPU, the priors' cameras are on the CPU
    out = rasterize(*scene.at(frame).as_args(), data.viewmats[frame:frame + 1].to(device), data.K[None].to(device),
                    data.width, data.height)
    depth, alpha = out.depth[0, ..., 0], out.alpha[0, ..., 0]
    H, W = data.height, data.width
    if alpha[H // 2, W // 2] >= 0.5:
        return float(depth[H // 2, W // 2])
    covered = depth[alpha >= 0.5]
    if covered.numel() == 0:
        raise ValueError(f"frame {frame} renders empty; no depth to place the global camera")
    return float(covered.median())


def global_camera(scene: DynamicScene, data: SceneData, fov_deg: float = 70.0, back: float = 0.5,
                  up: float = 0.2, frame: int | None = None, depth: float | None = None,
                  up_vector: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """docs/design.md's (Feature4X's) global view -> (viewmat [4,4], K [3,3]) at the scene's working resolution.

    ``frame`` defaults to T//2; ``depth`` (d) defaults to the rendered centre depth of that
    frame; ``up_vector`` defaults to :func:`up_direction`.
    """
    frame = data.frames // 2 if frame is None else frame
    view = data.viewmats[frame]
    d = centre_depth(scene, data, frame) if depth is None else float(depth)
    up_dir = F.normalize(up_vector.float(), dim=0) if up_vector is not None else up_direction(data, view)
    eye, forward = camera_centre(view), view[2, :3]
    target = eye + d * forward
    new_eye = eye - back * d * forward + up * d * up_dir
    return look_at(new_eye, target, up_dir), intrinsics(fov_deg, data.width, data.height)


# Frames the fill framing probes (evenly over the clip): the camera is the scene's, whichever frames are rendered.
FILL_PROBES = 5
# The narrowest crop one probe may pick, as a share of its frame: below it the crop has too few pixels to judge.
FILL_MIN_SCALE = 0.1
# Probes, each at the FoV the last one picked: a DAVIS clip filmed at ~15 deg ends near 11 deg, a 0.14 crop of a
# 70 deg probe (34x19 pixels of a 240 px frame), which the next probe sees at full resolution.
FILL_PASSES = 4


def coverage(alpha: Tensor) -> float:
    """Share of pixels with rendered content (alpha > 0.5); what the global view's framing is judged by."""
    return float((alpha > 0.5).float().mean())


@torch.no_grad()
def fill_fov(scene: DynamicScene, data: SceneData, view: Tensor, max_fov_deg: float = 70.0,
             target: float = 0.97) -> float:
    """The widest horizontal FoV (at most ``max_fov_deg``) at which ``view`` sees content over ``target`` of the frame.

    Narrowing the FoV of a camera that stays put crops its image about the centre, so one
    render (alpha at ``FILL_PROBES`` frames spread over the clip, since objects move) gives
    the coverage of every narrower FoV: the centred crop whose half-size is the share ``s``
    of the frame's holds the pixels whose larger normalised distance from the centre (x over
    W/2, y over H/2) is at most ``s``. The largest ``s`` still covered to ``target`` gives the
    next FoV; the next probe renders at that FoV, until one finds its whole frame covered.
    Where not even the central crop is covered, narrowing would only zoom into empty space,
    so the FoV reached so far is kept.
    """
    fov = max_fov_deg
    for _ in range(FILL_PASSES):
        scale = _covered_scale(scene, data, view, fov, target)
        if scale is None or scale >= 0.99:
            break
        fov = math.degrees(2 * math.atan(scale * math.tan(math.radians(fov) / 2)))
    return fov


def _covered_share(scene: DynamicScene, data: SceneData, view: Tensor, K: Tensor) -> Tensor:
    """``[H, W]`` share of the ``FILL_PROBES`` frames (spread over the clip) in which each pixel of ``view`` is
    covered (alpha > 0.5)."""
    device = scene.static.means.device
    W, H = data.width, data.height
    times = sorted({round(t) for t in torch.linspace(0, data.frames - 1, FILL_PROBES).tolist()})
    covered = torch.zeros(H, W)
    for t in times:
        out = rasterize(*scene.at(t).as_args(), view[None].to(device), K[None].to(device), W, H)
        covered += (out.alpha[0, ..., 0] > 0.5).float().cpu()
    return covered / len(times)


def aim_at_content(scene: DynamicScene, data: SceneData, view: Tensor, fov_deg: float, up_dir: Tensor) -> Tensor:
    """``view`` turned, from where it stands, towards the centroid of what it sees at ``fov_deg``.

    Why: the global camera looks at the middle frame's centre point, and where that point is
    empty (the input's centre saw sky, say) the content lies off to one side: no centred crop
    is covered and narrowing the FoV cannot fill the frame (DAVIS train, quick fit: 22%).
    """
    K = intrinsics(fov_deg, data.width, data.height)
    covered = _covered_share(scene, data, view, K)
    if covered.sum() == 0:
        return view
    ys, xs = torch.meshgrid(torch.arange(data.height) + 0.5, torch.arange(data.width) + 0.5, indexing="ij")
    weights = covered / covered.sum()
    pixel = torch.stack([(weights * xs).sum(), (weights * ys).sum(), torch.tensor(1.0)])
    ray = view[:3, :3].T @ (torch.linalg.inv(K) @ pixel)  # camera ray through the centroid, in world axes
    eye = camera_centre(view)
    return look_at(eye, eye + F.normalize(ray, dim=0), up_dir)


def _covered_scale(scene: DynamicScene, data: SceneData, view: Tensor, fov_deg: float,
                   target: float) -> float | None:
    """The largest centred crop (share of the frame's half-size, at least ``FILL_MIN_SCALE``) of ``view`` at
    ``fov_deg`` covered to ``target``; None when there is none."""
    W, H = data.width, data.height
    covered = _covered_share(scene, data, view, intrinsics(fov_deg, W, H))
    ys = ((torch.arange(H) + 0.5 - H / 2).abs() / (H / 2))[:, None]
    xs = ((torch.arange(W) + 0.5 - W / 2).abs() / (W / 2))[None, :]
    ring, order = torch.maximum(ys, xs).flatten().sort()
    share = covered.flatten()[order].cumsum(0) / torch.arange(1, H * W + 1)
    ok = (share >= target) & (ring >= FILL_MIN_SCALE)
    return float(ring[ok].max()) if ok.any() else None


@dataclass
class PathOptions:
    """Parameters of the camera paths (all overridable from the CLI)."""

    fov_deg: float = 70.0
    """Horizontal FoV of the orbit and birdseye cameras, and of the global one with `global-framing feature4x`
    (with `fill`, its widest)."""
    global_framing: Literal["fill", "feature4x"] = "fill"
    """Global view: `fill` narrows the FoV (same position and direction) until the rendered content covers
    `fill-target` of the frame; `feature4x` keeps `fov-deg` as Feature4X does (the content may fill a corner)."""
    fill_target: float = 0.97
    """Global view with `fill`: share of the frame (pixels with alpha > 0.5, over frames across the clip) to cover."""
    back: float = 0.5
    """Global view: distance behind the middle frame's camera, in units of its centre depth d."""
    up: float = 0.2
    """Global view: height above the middle frame's camera, in units of d."""
    frame: int | None = None
    """Reference frame of global/orbit/birdseye, and the frozen camera of `fixed` (default T//2)."""
    orbit_deg: float = 90.0
    """Orbit: total azimuth swept around the look-at point (centred on the middle frame's camera)."""
    birdseye_height: float = 1.5
    """Birdseye: height above the look-at point, in units of d."""


def camera_path(kind: str, scene: DynamicScene, data: SceneData, times: list[int],
                opts: PathOptions | None = None) -> CameraPath:
    """Cameras of path ``kind`` for the scene frames ``times`` (at the scene's working resolution)."""
    opts = opts or PathOptions()
    n, W, H = len(times), data.width, data.height
    ref = data.frames // 2 if opts.frame is None else opts.frame
    if not 0 <= ref < data.frames:
        raise ValueError(f"--frame {ref} is outside the scene's 0..{data.frames - 1}")
    if kind == "input":
        return CameraPath(data.viewmats[times], data.K.expand(n, 3, 3).clone(), times, W, H)
    if kind == "fixed":
        return CameraPath(data.viewmats[ref].expand(n, 4, 4).clone(), data.K.expand(n, 3, 3).clone(), times, W, H)
    if kind == "global":
        view, K = global_camera(scene, data, opts.fov_deg, opts.back, opts.up, ref)
        if opts.global_framing == "fill":
            if _covered_scale(scene, data, view, opts.fov_deg, opts.fill_target) is None:  # the centre is empty
                view = aim_at_content(scene, data, view, opts.fov_deg, up_direction(data, data.viewmats[ref]))
            K = intrinsics(fill_fov(scene, data, view, opts.fov_deg, opts.fill_target), W, H)
        elif opts.global_framing != "feature4x":
            raise ValueError(f"unknown global framing {opts.global_framing!r}; choose fill or feature4x")
        return CameraPath(view.expand(n, 4, 4).clone(), K.expand(n, 3, 3).clone(), times, W, H)
    if kind not in ("orbit", "birdseye"):
        raise ValueError(f"unknown camera path {kind!r}; choose one of {', '.join(PATHS)}")
    view = data.viewmats[ref]
    d = centre_depth(scene, data, ref)
    up_dir = up_direction(data, view)
    eye, forward = camera_centre(view), view[2, :3]
    target = eye + d * forward
    K = intrinsics(opts.fov_deg, W, H)
    if kind == "birdseye":
        # Straight down onto the look-at point; the image top points where the video camera looked.
        heading = F.normalize(forward - (forward @ up_dir) * up_dir, dim=0)
        top = look_at(target + opts.birdseye_height * d * up_dir, target, heading)
        return CameraPath(top.expand(n, 4, 4).clone(), K.expand(n, 3, 3).clone(), times, W, H)
    views = []
    for i in range(n):
        a = math.radians(opts.orbit_deg) * ((i / (n - 1) if n > 1 else 0.5) - 0.5)
        views.append(look_at(target + _rotate(eye - target, up_dir, a), target, up_dir))
    return CameraPath(torch.stack(views), K.expand(n, 3, 3).clone(), times, W, H)


def _rotate(v: Tensor, axis: Tensor, angle: float) -> Tensor:
    """Rodrigues rotation of vector ``v`` about unit ``axis``."""
    c, s = math.cos(angle), math.sin(angle)
    return v * c + torch.linalg.cross(axis, v) * s + axis * (axis @ v) * (1 - c)
