"""Exact k-nearest neighbours in 3D: ``knn()``, CPU + CUDA, for Gaussian-to-node binding and node topology.

Exact rather than approximate because the binding decides which nodes move a
Gaussian: a missed neighbour is a visible tear. The kernels never build the
P x M distance matrix (CPU: a uniform grid over the references searched in
growing shells with an exact stopping bound; CUDA: brute force with reference
tiles in shared memory), so P = 1M Gaussians against M = 10k nodes fits in
O(P k + M) memory. Results are sorted nearest first; among equal distances the
kernels prefer the smaller reference index.

The result is not differentiable: recompute distances from ``idx`` where a
gradient is wanted (e.g. ``(query - ref[idx]).square().sum(-1)``).
"""

from __future__ import annotations

import torch

from cuda_ext.checks import expect_same_float, expect_shape, finite_check, raise_first_failure
from cuda_ext.reference import knn as reference
from cuda_ext.skin import kernel_module


def validate(query: torch.Tensor, ref: torch.Tensor, k: int) -> None:
    """Raise ValueError naming the argument for any input the kernels must not see."""
    expect_shape("query", query, (None, 3))
    expect_shape("ref", ref, (None, 3))
    expect_same_float({"query": query, "ref": ref})
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= ref.shape[0]:
        raise ValueError(f"k must be an int in [1, {ref.shape[0]}] (number of ref points), got {k!r}")
    raise_first_failure([finite_check("query", query), finite_check("ref", ref)])


@torch.no_grad()
def knn(query: torch.Tensor, ref: torch.Tensor, k: int, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """``(idx[P, k] int32, dist2[P, k])``: the k nearest rows of ``ref[M, 3]`` for each row of ``query[P, 3]``.

    idx is int32 so that it can be passed straight to ``cuda_ext.skin.skin`` as node ids.
    ``backend``: "auto" (kernel if it builds, else twin), "kernel" or "reference". The CUDA kernel
    keeps at most 64 neighbours per thread; a larger k on CUDA runs the twin.
    """
    validate(query, ref, k)
    module = kernel_module(query.device, backend)
    if module is None or k > getattr(module, "KNN_MAX_K", k):
        return reference.knn(query, ref, k)
    return tuple(module.knn(query.contiguous(), ref.contiguous(), k))
