"""The scaffold's ARAP graph: pairs from whole trajectories, on several levels, and the loss on them."""

from __future__ import annotations

import math

import torch

from recon4d.fit.losses import arap_loss
from recon4d.fit.topology import arap_edges, trajectory_distance


def _rotation_z(angle: float) -> torch.Tensor:
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _two_blocks(T: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    """Two 4x4x2 grids of nodes (spacing 0.1) facing each other 0.05 apart at frame 0; the second one
    then drives off along +x and turns. Returns positions [T, 64, 3] and the block of each node."""
    g = torch.stack(torch.meshgrid(*(torch.arange(n) * 0.1 for n in (4, 4, 2)), indexing="ij"), -1).reshape(-1, 3)
    a, b = g, g + torch.tensor([0.35, 0.0, 0.0])
    frames = []
    for t in range(T):
        moved = (b - b.mean(0)) @ _rotation_z(0.1 * t).T + b.mean(0) + torch.tensor([0.15 * t, 0.0, 0.0])
        frames.append(torch.cat([a, moved]))
    return torch.stack(frames), torch.cat([torch.zeros(len(a)), torch.ones(len(b))]).long()


def test_trajectory_distance_is_a_quantile_of_the_per_frame_distances():
    torch.manual_seed(0)
    positions = torch.randn(20, 30, 3)
    got = trajectory_distance(positions, quantile=0.9, rows_per_chunk=7)
    per_frame = (positions[:, :, None] - positions[:, None]).norm(dim=-1)  # [T, M, M]
    expected = per_frame.sort(dim=0).values[17]  # the 18th smallest of 20 frames
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=0)


def test_arap_pairs_do_not_join_blocks_that_drive_apart():
    positions, block = _two_blocks()
    edges = arap_edges(positions, k=3, levels=3)
    count = [int((edges[:, 2] == level).sum()) for level in range(3)]
    assert count == [64 * 3, 16 * 3, 0]  # 3 pairs per node; no level of 4 nodes (it would join the blocks)
    assert (edges[:, 0] != edges[:, 1]).all()
    assert (block[edges[:, 0]] == block[edges[:, 1]]).all()


def test_arap_pairs_reach_no_farther_than_a_few_node_spacings():
    """Three nodes far off (another object, seen by few nodes) get no pairs to the main grid."""
    positions, block = _two_blocks()
    stray = torch.stack([positions[:, 0] + torch.tensor([0.0, 5.0 + 0.1 * n, 0.0]) for n in range(3)], 1)
    edges = arap_edges(torch.cat([positions, stray], 1), k=3, levels=1)
    owner = torch.cat([block, torch.full((3,), 2)])
    assert (owner[edges[:, 0]] == owner[edges[:, 1]]).all()
    assert ((edges[:, 0] >= 64).sum() == 3 * 2)  # the strays keep their two pairs among themselves
    # The canonical frame alone would join them: the facing nodes' nearest neighbours include the other block.
    canonical = arap_edges(positions[:1], k=3, levels=1)
    assert not (block[canonical[:, 0]] == block[canonical[:, 1]]).all()


def test_arap_loss_is_zero_for_rigid_motion_and_counts_every_level():
    positions, _ = _two_blocks()
    edges = arap_edges(positions, k=3, levels=2)
    assert float(arap_loss(positions, edges, ref=0)) < 1e-6  # each block moves rigidly
    stretched = positions.clone()
    stretched[5:, :, 0] *= 1.1  # from frame 5 on, everything stretches 10% along x
    change = float(arap_loss(stretched, edges, ref=0))
    assert change > 1e-3
    # The level means add up: the loss over both levels is the sum of the loss over each.
    each = [float(arap_loss(stretched, edges[edges[:, 2] == level], ref=0)) for level in (0, 1)]
    assert min(each) > 0 and math.isclose(change, sum(each), rel_tol=1e-5)
