"""Random Gaussian scenes for benchmarks: a filled view frustum with a realistic footprint mix.

Gaussians fill the frustum between depth 2 and 10 of one pinhole camera (60 degree
horizontal FoV). Their size shrinks as N grows (constant volume fraction), as in a
fitted scene where more Gaussians means finer ones, so the per-pixel work stays
comparable across the scaling rows.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def random_gaussians(
    n: int, channels: int, width: int, height: int, seed: int = 0
) -> tuple[list[Tensor], Tensor, Tensor]:
    """Returns ([means, quats, scales, opacities, features], viewmats [1,4,4], Ks [1,3,3])."""
    g = torch.Generator().manual_seed(seed)
    fx = 0.5 * width / math.tan(math.radians(30))
    depth = 2 + 8 * torch.rand(n, generator=g)
    u = torch.rand(n, generator=g) * width
    v = torch.rand(n, generator=g) * height
    means = torch.stack([(u - width / 2) / fx * depth, (v - height / 2) / fx * depth, depth], -1)
    quats = torch.randn(n, 4, generator=g)
    size = 0.03 * (1e5 / n) ** (1 / 3)
    scales = size * (0.3 + torch.rand(n, 3, generator=g))
    opacities = 0.1 + 0.9 * torch.rand(n, generator=g)
    features = torch.rand(n, channels, generator=g)
    Ks = torch.tensor([[[fx, 0, width / 2], [0, fx, height / 2], [0, 0, 1]]])
    return [means, quats, scales, opacities, features], torch.eye(4)[None], Ks
