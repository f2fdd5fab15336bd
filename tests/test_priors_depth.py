"""The depth step against exact depths: interpolation between tracks, the offline sparse fallback, the
alignment of a monocular prediction to the triangulated tracks, and loading Depth Anything V2 the real way
(a tiny random-weight checkpoint saved locally)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recon4d.priors.depth import DepthAnythingV2, SparseDepth, align, interpolate, sparse_depth
from recon4d.priors.flow import sample

def test_interpolate_is_piecewise_linear_inside_and_nearest_outside():
    rng = np.random.default_rng(1)
    uv = rng.uniform([20, 10], [108, 86], (300, 2))
    f = lambda p: 1 + 0.02 * p[..., 0] - 0.01 * p[..., 1]  # noqa: E731
    gy, gx = (np.mgrid[0:24, 0:32] + 0.5) * 4
    out = interpolate(uv, f(uv), gx, gy)
    inside = (gx > 30) & (gx < 100) & (gy > 20) & (gy < 76)  # well inside the points' hull
    assert np.abs(out - f(np.stack([gx, gy], -1)))[inside].max() < 1e-9
    nearest = np.linalg.norm(uv[None] - np.array([0.5 * 4, 0.5 * 4]), axis=-1).argmin()
    assert out[0, 0] == f(uv[nearest])


def test_the_sparse_depth_leaves_out_points_seen_in_two_frames():
    """A wall at depth 2 tracked in all three frames, and one point seen in two frames only, lifted at depth
    0.2 (two views cannot check it). The fallback's depth is the wall's around that point, not its own."""
    rng = np.random.default_rng(0)
    T, H, W = 3, 40, 50
    K = np.array([[50, 0, 25], [0, 50, 20], [0, 0, 1.0]])
    view = np.tile(np.eye(4), (T, 1, 1))
    xy = np.concatenate([rng.uniform(1, [W - 1, H - 1], (60, 2)), [[25.0, 20.0]]]).astype(np.float32)
    z = np.r_[np.full(60, 2.0), 0.2]
    points = np.concatenate([(xy - K[:2, 2]) / 50 * z[:, None], z[:, None]], 1)
    vis = np.ones((T, 61), bool)
    vis[2, 60] = False
    xy_t = np.repeat(xy[None], T, 0)
    assert SparseDepth().estimate(np.zeros((T, H, W, 3)), K, view, points, xy_t, vis)[0][0, 20, 25] == \
        pytest.approx(2.0, rel=1e-3)
    assert sparse_depth((T, H, W), view, points, xy_t, vis, min_views=2)[0, 20, 25] < 0.5


def test_depth_alignment_recovers_scale_and_shift():
    rng = np.random.default_rng(0)
    T, H, W = 3, 40, 50
    gy, gx = np.mgrid[0:H, 0:W]
    true = np.repeat((2 + 6 * gx / W + 2 * np.sin(gy / 6))[None], T, 0).astype(np.float32)
    K = np.array([[50, 0, 25], [0, 50, 20], [0, 0, 1.0]])
    view = np.tile(np.eye(4), (T, 1, 1))
    xy = np.tile(rng.uniform(1, [W - 1, H - 1], (200, 2)), (T, 1, 1)).astype(np.float32)
    z = sample(true[0][..., None], xy[0])[:, 0]
    points = np.concatenate([(xy[0] - K[:2, 2]) / 50 * z[:, None], z[:, None]], 1)  # on the rays of frame 0
    pred = np.repeat(((1 / true[:1]) - 0.1) / 3, T, 0)  # affine disparity, as Depth Anything predicts
    depth, fits = align(pred, "disparity", K, view, points, xy, np.ones((T, 200), bool))
    assert np.allclose(fits[0], [3, 0.1], rtol=1e-2, atol=1e-2)
    assert np.median(np.abs(depth[0] / true[0] - 1)) < 0.02


def test_a_depth_fit_that_puts_pixels_behind_the_camera_takes_the_other_frames_fit():
    """Frame 2 sees only the points on the right of the frame, where its map relates to their depth as
    z = 3 v - 5; its left holds v = 1, which that exact fit maps to depth -2. It takes the other frames'
    fit (the identity) instead."""
    rng = np.random.default_rng(0)
    T, H, W = 3, 40, 50
    gy, gx = np.mgrid[0:H, 0:W]
    truth = (1 + 3 * gx / W).astype(np.float32)  # depth 1 (left) to 4 (right)
    values = np.stack([truth, truth, np.where(gx > 0.6 * W, (truth + 5) / 3, 1.0)]).astype(np.float32)
    K = np.array([[50, 0, 25], [0, 50, 20], [0, 0, 1.0]])
    view = np.tile(np.eye(4), (T, 1, 1))
    xy = rng.uniform(1, [W - 1, H - 1], (200, 2)).astype(np.float32)
    z = sample(truth[..., None], xy)[:, 0]
    points = np.concatenate([(xy - K[:2, 2]) / 50 * z[:, None], z[:, None]], 1)
    vis = np.stack([np.ones(200, bool), np.ones(200, bool), xy[:, 0] > 0.7 * W])
    depth, fits = align(values, "depth", K, view, points, np.repeat(xy[None], T, 0), vis)
    assert np.allclose(fits[0], [1, 0], atol=1e-3) and np.array_equal(fits[2], fits[0])
    assert depth[2].min() > 0.9


def tiny_depth_anything(folder: Path) -> Path:
    """A tiny random-weight Depth Anything V2 checkpoint saved in ``folder`` (the real model classes)."""
    pytest.importorskip("transformers")
    from transformers import DepthAnythingConfig, DepthAnythingForDepthEstimation, Dinov2Config

    backbone = Dinov2Config(hidden_size=32, num_hidden_layers=4, num_attention_heads=2, intermediate_size=64,
                            image_size=56, out_features=["stage1", "stage2", "stage3", "stage4"],
                            reshape_hidden_states=False)
    cfg = DepthAnythingConfig(backbone_config=backbone, reassemble_hidden_size=32, neck_hidden_sizes=[16] * 4,
                              fusion_hidden_size=16, head_hidden_size=16)
    DepthAnythingForDepthEstimation(cfg).save_pretrained(folder)
    return folder


def test_depth_anything_loads_local_weights(tmp_path):
    """The real transformers loading path, on a tiny random-weight checkpoint saved locally."""
    tiny_depth_anything(tmp_path / "da")
    assert not DepthAnythingV2(str(tmp_path / "missing")).available()
    asked = DepthAnythingV2(str(tmp_path / "missing"), download=True)  # --depth da-v2: the user asked for it
    assert asked.available()
    with pytest.raises(FileNotFoundError, match="--depth-model DIR"):
        asked.load()
    provider = DepthAnythingV2(str(tmp_path / "da"))
    assert provider.available()
    depth, kind = provider.estimate(np.zeros((2, 48, 64, 3), np.uint8), progress=False)
    assert depth.shape == (2, 48, 64) and kind == "disparity" and np.isfinite(depth).all()
