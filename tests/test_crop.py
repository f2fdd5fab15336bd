"""The nodes stage's crop: the box around a frame's moving objects, rendered exactly as the full frame's."""

from __future__ import annotations

import dataclasses

import torch

from recon4d.fit.crop import cropped, motion_box
from recon4d.render import rasterize
from tests.test_coarse import _tiny_data, random_gaussians


def test_the_box_holds_the_mask_and_its_margin_within_the_frame():
    mask = torch.zeros(48, 64, dtype=torch.bool)
    assert motion_box(mask) == (0, 0, 64, 48)  # nothing moves: the whole frame
    mask[10:20, 30:41] = True
    assert motion_box(mask, margin=0.0) == (30, 10, 41, 20)
    assert motion_box(mask, margin=4 / 64) == (26, 6, 45, 24)
    mask[0, 63] = True
    assert motion_box(mask, margin=4 / 64) == (26, 0, 64, 24)


def test_a_render_of_the_box_is_the_box_of_the_full_render():
    """Random Gaussians rendered at the cropped intrinsics and size give the full render's pixels of the box
    away from its edge (at the edge, Gaussians centred outside get the frustum clamp of the crop's projection:
    measured 2e-3 off in the last three rows, 4e-7 inside), and the cropped frames hold the same box of every
    map."""
    gaussians, view, K, (H, W) = random_gaussians()
    data = dataclasses.replace(_tiny_data(2, H, W), K=K, depth=torch.rand(2, H, W))
    x0, y0, x1, y1 = box = (13, 7, 50, 31)
    crop = cropped(data, box)
    assert (crop.width, crop.height) == (x1 - x0, y1 - y0)
    for name in ("images", "depth", "dynamic_mask"):
        assert torch.equal(getattr(crop, name), getattr(data, name)[:, y0:y1, x0:x1])
    for backend in ("torch", "auto"):
        full = rasterize(*gaussians, view, K[None], W, H, backend=backend)
        part = rasterize(*gaussians, view, crop.K[None], crop.width, crop.height, backend=backend)
        inside = (slice(None), slice(y0 + 4, y1 - 4), slice(x0 + 4, x1 - 4))
        torch.testing.assert_close(part.features[:, 4:-4, 4:-4], full.features[inside], atol=1e-5, rtol=0)
        torch.testing.assert_close(part.depth[:, 4:-4, 4:-4], full.depth[inside], atol=1e-4, rtol=0)
