"""The joint stage's coarse start: half-resolution frames that line up with the full ones, for the first
``coarse_fraction`` of its steps only."""

from __future__ import annotations

import dataclasses

import torch

from recon4d.fit.coarse import halved
from recon4d.fit.trainer import FitConfig, StageSteps, Trainer
from recon4d.render import rasterize
from recon4d.scene.data import SceneData, load_scene_data
from tests.conftest import requires_compiler


def test_a_render_at_the_halved_intrinsics_lines_up_with_the_halved_frames():
    """Frames rendered from random Gaussians (1 to 4 pixels across), halved, match a render at the halved
    intrinsics better than at intrinsics a quarter of a coarse pixel off either way: pixel centres at +0.5
    halve exactly."""
    gaussians, view, K, (H, W) = random_gaussians()
    frame = rasterize(*gaussians, view, K[None], W, H, backend="torch").features
    half = halved(dataclasses.replace(_tiny_data(1, H, W), images=frame, K=K))

    def error(shift: float) -> float:
        shifted = half.K.clone()
        shifted[:2, 2] += shift
        render = rasterize(*gaussians, view, shifted[None], W // 2, H // 2, backend="torch").features
        return float((render - half.images).square().mean())

    assert error(0.0) < 0.8 * min(error(-0.25), error(0.25))


def test_sparse_depth_stays_sparse_and_a_block_is_dynamic_where_half_its_pixels_are():
    T, H, W = 1, 4, 6
    depth = torch.zeros(T, H, W)
    depth[0, 0, 0] = 3.0  # one known depth in the first block
    depth[0, 2:4, 2:4] = torch.tensor([[2.0, 4.0], [0.0, 0.0]])  # two in another
    mask = torch.zeros(T, H, W, dtype=torch.bool)
    mask[0, 0, 2:4] = True  # half of block (0, 1)
    mask[0, 2, 4] = True  # a quarter of block (1, 2)
    data = dataclasses.replace(_tiny_data(T, H, W), depth=depth, dynamic_mask=mask)
    half = halved(data)
    assert half.depth[0].tolist() == [[3.0, 0.0, 0.0], [0.0, 3.0, 0.0]]
    assert half.dynamic_mask[0].tolist() == [[False, True, False], [False, False, False]]
    torch.testing.assert_close(half.K, torch.tensor([[5.0, 0, 1.5], [0, 5.0, 1.0], [0, 0, 1]]))


def random_gaussians() -> tuple[tuple[torch.Tensor, ...], torch.Tensor, torch.Tensor, tuple[int, int]]:
    """1500 random Gaussians (1 to 4 pixels across) filling a 64x48 view: ``(means, quats, scales, opacities,
    colours)``, the view matrix, K and (H, W)."""
    torch.manual_seed(0)
    n = 1500
    means = torch.cat([torch.rand(n, 2) * 4 - 2, torch.full((n, 1), 5.0)], 1)
    scales, opacities = 0.15 * torch.rand(n, 3).add(0.5), torch.rand(n) * 0.5 + 0.3
    gaussians = (means, torch.randn(n, 4), scales, opacities, torch.rand(n, 3))
    K = torch.tensor([[50.0, 0, 32.0], [0, 50.0, 24.0], [0, 0, 1]])
    return gaussians, torch.eye(4)[None], K, (48, 64)


def _tiny_data(T: int, H: int, W: int) -> SceneData:
    K = torch.tensor([[10.0, 0, 3.0], [0, 10.0, 2.0], [0, 0, 1]])
    return SceneData(images=torch.rand(T, H, W, 3), K=K, viewmats=torch.eye(4).expand(T, 4, 4),
                     depth=torch.zeros(T, H, W), dynamic_mask=torch.zeros(T, H, W, dtype=torch.bool),
                     track_xy=torch.zeros(T, 0, 2), track_visible=torch.zeros(T, 0, dtype=torch.bool),
                     track_dynamic=torch.zeros(0, dtype=torch.bool))


@requires_compiler
def test_only_the_first_fraction_of_the_joint_stage_renders_coarse(fitted_left_scene, tmp_path):
    _, scene_dir = fitted_left_scene
    data = load_scene_data(scene_dir)
    data.teachers = {}
    steps = StageSteps(static=2, scaffold=2, motion=1, joint=8, cameras=1, settle=2, features=0)
    cfg = FitConfig(steps=steps, coarse_fraction=0.5)
    cfg.densify.enabled = False
    cfg.init.static_stride = 6
    trainer = Trainer(data, cfg, tmp_path / "model", log=lambda _: None)
    sizes: dict[str, list[tuple[int, int]]] = {}
    real_render = trainer.render

    def recording(t, **kw):
        out = real_render(t, **kw)
        sizes.setdefault(trainer.stage, []).append(tuple(out.features.shape[1:3]))
        return out

    trainer.render = recording
    trainer.initialise()
    trainer.run()
    full, coarse = (data.height, data.width), (data.height // 2, data.width // 2)
    assert sizes["joint"] == [coarse] * 4 + [full] * 4
    assert {size for stage, seen in sizes.items() if stage != "joint" for size in seen} == {full}
