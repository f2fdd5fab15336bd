"""The scaffold's node graph: which nodes sample the dynamic points, and which pairs ARAP holds rigid.

Why the ARAP pairs come from whole trajectories and not from the canonical frame: two nodes that
are close at the reference frame but on different objects or limbs (a foot passing the other
leg, a car overtaking a cyclist) come apart later, and an edge between them would glue them
together. The distance between two node trajectories is a high quantile over frames of their
per-frame distance, so nodes that are ever far apart are not neighbours, while a few frames of
lifting noise (a bad depth, a track jump) do not break an edge.

Why several levels: ARAP between nearest nodes only keeps each small neighbourhood rigid; a
rigid body's far ends can still bend slowly through a chain of small deformations. Coarser
levels (farthest-point subsets of the nodes, a quarter as many per level) add longer edges over
the same trajectory distance, which hold larger parts rigid where the motion allows it. They are
off by default (``InitConfig.arap_levels``): on an articulated body they cost PSNR.
"""

from __future__ import annotations

import torch
from torch import Tensor


def farthest_points(points: Tensor, m: int) -> Tensor:
    """Indices of m farthest-point samples (deterministic: starts at the point nearest the centroid).

    The indices stay tensors on the points' device, so a GPU never waits for the host between picks."""
    m = min(m, len(points))
    chosen = [torch.argmin((points - points.mean(0)).norm(dim=1))]
    dist = (points - points[chosen[0]]).norm(dim=1)
    for _ in range(m - 1):
        chosen.append(torch.argmax(dist))
        dist = torch.minimum(dist, (points - points[chosen[-1]]).norm(dim=1))
    return torch.stack(chosen)


def trajectory_distance(positions: Tensor, quantile: float = 0.9, rows_per_chunk: int = 64) -> Tensor:
    """[M, M] distance between node trajectories ``positions`` [T, M, 3]: the ``quantile`` over frames
    of the per-frame Euclidean distance. Computed a block of rows at a time ([T, rows, M] floats),
    since all pairs at all frames at once would not fit for thousands of nodes."""
    T, M, _ = positions.shape
    top = T - min(T, max(1, round(quantile * T))) + 1  # the quantile is the smallest of this many largest
    out = torch.empty(M, M, dtype=positions.dtype, device=positions.device)
    for start in range(0, M, rows_per_chunk):
        # exact differences, not cdist's |a|^2 + |b|^2 - 2ab, whose cancellation errs by millimetres
        # at a few metres from the origin, the spacing of neighbouring nodes
        block = torch.cdist(positions[:, start:start + rows_per_chunk], positions,
                            compute_mode="donot_use_mm_for_euclid_dist")  # [T, rows, M]
        # topk along a contiguous last axis: 5x faster than kthvalue or sort across frames
        out[start:start + rows_per_chunk] = block.permute(1, 2, 0).contiguous().topk(top, dim=-1).values.amin(-1)
    return out


def arap_edges(positions: Tensor, k: int = 5, levels: int = 1, keep_ratio: int = 4, reach: float = 3.0) -> Tensor:
    """ARAP pairs ``[E, 3]`` (node i, node j, level) of node trajectories ``positions`` [T, M, 3].

    Level 0 joins every node to its ``k`` nearest nodes in trajectory distance; level l does the
    same among ``M / keep_ratio**l`` farthest-point samples of the nodes at the first frame (any
    frame would do: the sampling only needs a spread). A coarse level is
    built only while it has more than ``keep_ratio * k`` nodes. A pair farther apart than ``reach``
    times the level's median nearest-neighbour distance is dropped.

    Why both limits: an object with fewer nodes than ``k + 1`` at a level must take neighbours on
    another object, and a distance-keeping pair between two objects that move apart drags both
    (measured in docs/decisions.md).
    """
    M = positions.shape[1]
    if M < 2:
        return torch.zeros(0, 3, dtype=torch.long, device=positions.device)
    dist = trajectory_distance(positions)
    edges = []
    for level in range(levels):
        m = M // keep_ratio**level
        if level and m <= keep_ratio * k:
            break
        nodes = torch.arange(M, device=positions.device) if level == 0 else \
            farthest_points(positions[0], m).to(positions.device)
        kk = min(k, len(nodes) - 1)
        sub = dist[nodes][:, nodes].fill_diagonal_(float("inf"))  # not its own neighbour
        near_dist, nearest = sub.topk(kk, dim=1, largest=False)
        keep = near_dist <= reach * near_dist[:, 0].median()
        i = nodes[:, None].expand(-1, kk)
        pairs = torch.stack([i, nodes[nearest], torch.full_like(i, level)], -1)
        edges.append(pairs[keep])
    return torch.cat(edges)


__all__ = ["arap_edges", "farthest_points", "trajectory_distance"]
