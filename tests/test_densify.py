"""Densification under a Gaussian budget: pruning frees room, the steepest gradients grow first."""

from __future__ import annotations

import torch

from recon4d.fit.densify import DensifyConfig, Densifier
from recon4d.scene import GaussianSet


def _set(n: int, scale: float) -> GaussianSet:
    means = torch.arange(n, dtype=torch.float32)[:, None] * torch.tensor([1.0, 0.0, 0.0])
    return GaussianSet(means, torch.full((n, 3), scale), torch.full((n, 3), 0.5), torch.full((n,), 0.5))


def test_at_the_cap_growth_takes_the_pruned_room_by_gradient():
    gs = _set(10, scale=0.01)  # all small: high-gradient ones are duplicated
    with torch.no_grad():
        gs.opacity_logits[[7, 8]] = -10.0  # nearly transparent: pruned, freeing two places
    grad = torch.zeros(10)
    grad[[1, 3, 5, 9]] = torch.tensor([1e-3, 5e-3, 3e-3, 4e-3])
    cfg = DensifyConfig(max_gaussians=10, grow_grad2d=2e-4, grow_scale3d=0.01)
    Densifier(cfg, extent=10.0)._refine_set(gs, grad, None)
    x = gs.means[:, 0].round().long().tolist()
    assert len(gs) == 10  # at the cap: two pruned, two grown
    assert 7 not in x and 8 not in x
    assert sorted(x) == sorted([0, 1, 2, 3, 4, 5, 6, 9, 3, 9])  # the two steepest of the four are duplicated


def test_split_counts_one_against_the_budget():
    gs = _set(4, scale=1.0)  # all large: high-gradient ones are split in two
    grad = torch.tensor([1e-3, 0.0, 2e-3, 0.0])
    Densifier(DensifyConfig(max_gaussians=5, grow_scale3d=0.01), extent=10.0)._refine_set(gs, grad, None)
    assert len(gs) == 5  # one split (the steepest, Gaussian 2) replaces one by two
    assert torch.isclose(gs.scales[-2:], torch.full((2, 3), 1.0 / 1.6)).all()
    assert (gs.means[-2:, 0] - 2.0).abs().max() < 5.0 and (gs.means[:3, 0].round() == torch.tensor([0.0, 1.0, 3.0])).all()


def test_huge_is_an_angle_beyond_the_extent():
    # extent 2 and the cameras about the origin: a Gaussian of scale 0.5 is huge at distance 1 and 3 (above a
    # tenth of the extent, and of its distance), and not at distance 40, where it covers less than a pixel-sized
    # angle of a near one (a far hillside's Gaussian, sized to its pixel footprint there)
    means = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 3.0], [0.0, 0.0, 40.0], [0.0, 0.0, 40.0]])
    scales = torch.tensor([[0.5] * 3, [0.5] * 3, [0.5] * 3, [5.0] * 3])
    gs = GaussianSet(means, scales, torch.full((4, 3), 0.5), torch.full((4,), 0.5))
    Densifier(DensifyConfig(), extent=2.0, eye=torch.zeros(3))._refine_set(gs, torch.zeros(4), None)
    assert gs.means[:, 2].tolist() == [40.0]  # the third: 0.5 < 0.1 * 40; the fourth: 5 > 0.1 * 40
    near_only = GaussianSet(means, scales, torch.full((4, 3), 0.5), torch.full((4,), 0.5))
    Densifier(DensifyConfig(), extent=2.0)._refine_set(near_only, torch.zeros(4), None)
    assert len(near_only) == 0  # without the cameras' centre: the extent alone
