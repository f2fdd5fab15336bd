"""Loss terms of the fit; each is a small function of rendered maps or scaffold tensors.

Photometric and feature terms are L1 + 0.1 (1 - SSIM) (kornia's SSIM map, computed in one convolution), as in the
reference systems. Geometry terms regularise the scaffold: ARAP keeps distances between
neighbouring nodes constant over time; velocity and acceleration penalise jitter.
"""

from __future__ import annotations

import kornia
import torch
import torch.nn.functional as F
from torch import Tensor


def l1_ssim(pred: Tensor, target: Tensor, ssim_weight: float = 0.1, ssim_downsample: int = 1) -> Tensor:
    """L1 + w (1 - SSIM) on [H,W,C] maps (C any); the SSIM of the maps averaged over ``ssim_downsample`` pixels
    a side (its convolutions and the elementwise work around them cost about a quarter at 2)."""
    l1 = (pred - target).abs().mean()
    p, t = pred.permute(2, 0, 1)[None], target.permute(2, 0, 1)[None]
    if ssim_downsample > 1:
        p, t = F.avg_pool2d(p, ssim_downsample), F.avg_pool2d(t, ssim_downsample)
    window = 11 if min(p.shape[-2:]) >= 64 else 5 if min(p.shape[-2:]) >= 8 else 3
    return l1 + ssim_weight * (1 - ssim(p, t, window).mean())


def ssim(x: Tensor, y: Tensor, window: int, max_val: float = 1.0) -> Tensor:
    """SSIM map of ``[B, C, H, W]`` images: ``kornia.metrics.ssim``'s map (Gaussian window, sigma 1.5,
    reflect padding), with its five local moments filtered in one grouped convolution.

    Why not call kornia's: it filters the five moment maps one at a time, ten small
    convolutions forward and as many backward; on 2 CPU cores that was 36 ms of a
    100 ms training step at 480x270, one stacked 2D convolution takes 14 ms.
    """
    c1, c2 = (0.01 * max_val) ** 2, (0.03 * max_val) ** 2
    g = kornia.filters.get_gaussian_kernel1d(window, 1.5, device=x.device, dtype=x.dtype)[0]
    maps = torch.cat([x, y, x * x, y * y, x * y], 1)
    pad = window // 2
    n = maps.shape[1]
    kernel = (g[:, None] * g[None]).expand(n, 1, window, window)
    moments = F.conv2d(F.pad(maps, (pad, pad, pad, pad), mode="reflect"), kernel, groups=n)
    mx, my, xx, yy, xy = moments.chunk(5, 1)
    var_x, var_y, cov = xx - mx * mx, yy - my * my, xy - mx * my
    return ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx * mx + my * my + c1) * (var_x + var_y + c2) + 1e-12)


def depth_loss(pred: Tensor, prior: Tensor, alpha: Tensor) -> Tensor:
    """Relative L1 between rendered and prior depth where both exist, each pixel's error capped at 1.

    Priors from monocular estimators have outliers (near-zero depths, wrong layers); the
    floor on the prior and the cap keep one bad pixel from dominating the step. Written
    with masks rather than boolean gathers, which would make a GPU wait for the host.
    """
    valid = (prior > 0) & (alpha > 0.5)
    floor = 0.05 * torch.nan_to_num(torch.nanmedian(torch.where(valid, prior, torch.nan)), nan=1.0)
    rel = ((pred - prior).abs() / prior.clamp(min=floor)).clamp(max=1.0)
    return torch.where(valid, rel, 0.0).sum() / valid.sum().clamp(min=1)


def mask_loss(pred: Tensor, mask: Tensor) -> Tensor:
    """L1 between the rendered dynamic channel and the dynamic mask."""
    return (pred - mask.float()).abs().mean()


def arap_loss(positions: Tensor, edges: Tensor, ref: int) -> Tensor:
    """Node-pair distances at every frame vs at the reference frame: positions [T,M,3], edges [E,3]
    (node i, node j, level) as ``topology.arap_edges`` builds them. The mean change of each level's
    pairs, summed over levels, so the few long pairs of a coarse level are not drowned by the many
    short ones."""
    if len(edges) == 0:
        return positions.sum() * 0
    # index_select, not positions[:, edges[:, 0]]: indexing's backward adds into the nodes with atomic adds
    # once the pairs are many (a DAVIS scaffold), in an order that changes from run to run.
    ends = [torch.index_select(positions, 1, edges[:, k]) for k in (0, 1)]
    d = (ends[0] - ends[1]).norm(dim=-1)  # [T,E]
    change = (d - d[ref].detach()[None]).abs().mean(0)  # [E]
    level = edges[:, 2]
    # Levels count up from 0 and each has a pair, so there are at most E of them: sizing the sums by E
    # (not by the largest level, which a GPU would have to send to the host) leaves the rest zero.
    per_level = change.new_zeros(len(edges)).index_add(0, level, change)
    pairs = change.new_zeros(len(edges)).index_add(0, level, torch.ones_like(change))
    return (per_level / pairs.clamp(min=1)).sum()


def smoothness_loss(positions: Tensor) -> tuple[Tensor, Tensor]:
    """Mean velocity and acceleration magnitudes of node trajectories [T,M,3]."""
    if positions.shape[0] < 3:
        zero = positions.sum() * 0
        return zero, zero
    vel = positions[1:] - positions[:-1]
    acc = vel[1:] - vel[:-1]
    return vel.norm(dim=-1).mean(), acc.norm(dim=-1).mean()
