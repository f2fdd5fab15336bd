"""The scene's frames at half resolution, for the first steps of a stage that starts coarse.

Why: on a CPU a step's time is mostly the rasterizer and the per-pixel losses, so a step on a quarter of the
pixels costs about a quarter less (docs/decisions.md); the early steps of the joint stage move Gaussians by
more than a pixel, which the coarse image shows as well as the full one. Pixel centres sit at +0.5 (as in
the rasterizer), so a 2x2 block's centre is the full-resolution position halved, and halving the intrinsics is
exact. An odd last row or column is dropped.
"""

from __future__ import annotations

import dataclasses

import torch.nn.functional as F
from torch import Tensor

from recon4d.scene.data import SceneData


def _pooled(x: Tensor) -> Tensor:
    """[T,H,W,C] -> [T,H//2,W//2,C], each 2x2 block's mean."""
    return F.avg_pool2d(x.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1).contiguous()


def halved(data: SceneData) -> SceneData:
    """``data`` with its images, depth priors and dynamic masks at half resolution and its intrinsics halved.

    A block's depth is the mean of its pixels that have one (a sparse prior stays sparse rather than being
    pulled towards 0); a block is dynamic where at least half its pixels are. Tracks, cameras and teachers
    are not image grids here and stay as they are.
    """
    depth = data.depth[..., None]
    known = (depth > 0).float()
    depth = (_pooled(depth) / _pooled(known).clamp(min=0.25))[..., 0]
    K = data.K.clone()
    K[:2] *= 0.5
    return dataclasses.replace(data, images=_pooled(data.images), depth=depth, K=K,
                               dynamic_mask=_pooled(data.dynamic_mask[..., None].float())[..., 0] >= 0.5)
