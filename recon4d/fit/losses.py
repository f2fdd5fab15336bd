"""Loss terms of the fit; each is a small function of rendered maps or scaffold tensors.

Photometric and feature terms are L1 + 0.1 (1 - SSIM) (kornia's SSIM map; ``cuda_ext.ssim``), as in the
reference systems. Geometry terms regularise the scaffold: ARAP keeps distances between
neighbouring nodes constant over time; velocity and acceleration penalise jitter.
"""

from __future__ import annotations

import torch
from torch import Tensor

from cuda_ext.ssim import ssim_mean


def l1_ssim(pred: Tensor, target: Tensor, ssim_weight: float = 0.1, ssim_downsample: int = 1) -> Tensor:
    """L1 + w (1 - SSIM) on [H,W,C] maps (C any); the SSIM of the maps averaged over ``ssim_downsample`` pixels
    a side (its filtering and the elementwise work around it cost about a quarter at 2)."""
    l1 = (pred - target).abs().mean()
    side = min(pred.shape[0], pred.shape[1]) // ssim_downsample
    window = 11 if side >= 64 else 5 if side >= 8 else 3
    return l1 + ssim_weight * (1 - ssim_mean(pred, target, window, ssim_downsample))


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
