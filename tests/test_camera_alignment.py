"""Direct alignment of a render onto its frame: the image shift (the bench) and the camera motion (the fit)."""

from __future__ import annotations

import json
import math

import torch
import torch.nn.functional as F

from recon4d.fit.cameras import PoseRefinement, align_camera, still_camera
from recon4d.geometry import rodrigues_torch
from recon4d.render import rasterize
from recon4d.render.alignment import image_shift
from recon4d.scene.data import load_scene_data
from recon4d.scene.model import RGB
from recon4d.scene.state import load_scene
from recon4d.scene_folder import SceneFolder


def _shifted(image: torch.Tensor, dx: float, dy: float) -> torch.Tensor:
    """``image(x + d)`` by bilinear resampling ([H, W, C])."""
    H, W, _ = image.shape
    ys, xs = torch.meshgrid(torch.arange(H) + 0.0, torch.arange(W) + 0.0, indexing="ij")
    grid = torch.stack([(xs + dx) / (W - 1) * 2 - 1, (ys + dy) / (H - 1) * 2 - 1], -1)[None]
    return F.grid_sample(image.permute(2, 0, 1)[None], grid, align_corners=True, padding_mode="border")[0].permute(1, 2, 0)


def test_image_shift_measures_a_known_sub_pixel_shift():
    torch.manual_seed(0)
    texture = F.interpolate(torch.rand(1, 3, 12, 16), size=(96, 128), mode="bicubic", align_corners=False)[0]
    image = texture.permute(1, 2, 0).contiguous()
    region = torch.ones(96, 128, dtype=torch.bool)
    region[:, :10] = False  # the border, where resampling clamps
    region[:, -10:] = region[:10] = region[-10:] = False
    render = _shifted(image, -0.7, 0.4)  # the render sits 0.7 px right of and 0.4 px above the frame
    d = image_shift(render, image, region)
    assert torch.allclose(d, torch.tensor([0.7, -0.4], dtype=torch.float64), atol=0.03)
    flat = torch.full_like(image, 0.5)
    assert torch.equal(image_shift(flat, flat, region), torch.zeros(2, dtype=torch.float64))  # nothing to tell by


def test_compose_puts_a_camera_motion_in_front_of_the_correction():
    poses = PoseRefinement(3)
    poses.release_first()
    with torch.no_grad():
        poses.delta[1] = torch.tensor([0.01, -0.02, 0.03, 0.1, 0.2, -0.3])
    views = torch.eye(4).repeat(3, 1, 1)
    views[:, :3, 3] = torch.tensor([0.5, -1.0, 2.0])
    before = poses(views)[1].double()
    twist = torch.tensor([0.002, 0.004, -0.001, 0.01, -0.02, 0.03], dtype=torch.float64)
    poses.compose(1, twist)
    motion = torch.eye(4, dtype=torch.float64)
    motion[:3, :3] = rodrigues_torch(twist[None, :3])[0]
    motion[:3, 3] = twist[3:]
    assert torch.allclose(poses(views)[1].double(), motion @ before, atol=1e-6)


def _rotation_deg(a: torch.Tensor, b: torch.Tensor) -> float:
    cos = ((a[:3, :3].T @ b[:3, :3]).trace() - 1) / 2
    return math.degrees(math.acos(float(cos.clamp(-1, 1))))


def test_a_knocked_camera_is_aligned_back(fitted_left_scene):
    """A fitted frame's camera moved by ~0.3 deg and ~1.4% of the depth (pan, tilt, roll and a sideways and
    forward step): two alignment steps bring the rotation and the background's error most of the way
    back, and the position no further off (a step along the line of sight barely shows in the image)."""
    _, scene_dir = fitted_left_scene
    data = load_scene_data(scene_dir)
    scene, _, _ = load_scene(SceneFolder(scene_dir).model)
    t = data.frames // 2
    depth = float(data.depth[t][data.depth[t] > 0].median())
    poses = PoseRefinement(data.frames)
    poses.release_first()
    knock = torch.tensor([0.004, -0.003, 0.002, 0.008 * depth, -0.005 * depth, 0.01 * depth])
    with torch.no_grad():
        poses.delta[t] = knock
    truth = data.viewmats[t]

    def render():
        view = poses.apply_to(data.viewmats[t:t + 1], torch.tensor([t]))
        return rasterize(*scene.at(t).as_args(), view, data.K[None], data.width, data.height)

    def state() -> tuple[float, float, float]:
        with torch.no_grad():
            view = poses.apply_to(data.viewmats[t:t + 1], torch.tensor([t]))[0]
            error = float(((render().features[0, ..., RGB] - data.images[t]) ** 2)[~data.dynamic_mask[t]].mean())
        centre = lambda v: -v[:3, :3].T @ v[:3, 3]  # noqa: E731
        return _rotation_deg(view, truth), float((centre(view) - centre(truth)).norm()) / depth, error

    rot0, pos0, err0 = state()
    align_camera(poses, t, data, render, steps=2)
    rot, pos, err = state()
    assert rot < 0.3 * rot0 and pos < pos0 and err < 0.3 * err0, (rot0, rot, pos0, pos, err0, err)


def test_a_camera_its_tracks_show_still_keeps_its_poses(tmp_path):
    # The priors' camera.json as the solve writes it: still below a hundredth of the width of median track
    # motion over the clip (DAVIS breakdance 0.9 px of 480), or the static model; a panning camera is refined.
    def camera(motion_type: str, moved: float | None) -> object:
        path = tmp_path / f"{motion_type}-{moved}.json"
        info = {} if moved is None else {"median_track_motion_px": moved}
        path.write_text(json.dumps({"motion_type": motion_type, "info": info}))
        return path

    assert "0.89 px" in still_camera(camera("translation", 0.89), 480)
    assert still_camera(camera("rotation", 10.05), 480) is None
    assert still_camera(camera("static", None), 480) is not None
    assert still_camera(camera("translation", None), 480) is None
    assert still_camera(tmp_path / "none.json", 480) is None  # no priors' camera: nothing to keep
