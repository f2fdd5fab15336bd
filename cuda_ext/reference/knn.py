"""PyTorch twin of the exact k-nearest-neighbour kernel.

Queries are processed in chunks sized so that the chunk x M distance matrix stays
under a fixed budget: memory is O(chunk * M), never P x M. Distances are computed
as explicit squared differences rather than with ``torch.cdist``, whose matmul
expansion ``|q|^2 - 2 q.r + |r|^2`` loses digits and can reorder near neighbours.
"""

from __future__ import annotations

import torch

CHUNK_ELEMENTS = 1 << 22  # distance entries per chunk (~16 MB of float32, 3x that while computing)


def knn(query: torch.Tensor, ref: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Return ``(idx[P, k] int32, dist2[P, k])``: the k nearest ``ref`` rows of every query, nearest first.

    Among exactly equal distances the order is whatever ``torch.topk`` gives (the kernels
    prefer the smaller index). Inputs are not validated here; ``cuda_ext.knn.knn`` does that.
    """
    chunk = max(1, CHUNK_ELEMENTS // max(1, ref.shape[0]))
    idx_parts, dist_parts = [], []
    for start in range(0, query.shape[0], chunk):
        q = query[start : start + chunk]
        d2 = (q[:, None, :] - ref[None, :, :]).square().sum(-1)
        dist, idx = torch.topk(d2, k, dim=1, largest=False, sorted=True)
        idx_parts.append(idx.to(torch.int32))
        dist_parts.append(dist)
    if not idx_parts:
        return query.new_empty((0, k), dtype=torch.int32), query.new_empty((0, k))
    return torch.cat(idx_parts), torch.cat(dist_parts)
