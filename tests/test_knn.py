"""Exact k-NN: kernels against the PyTorch twin, ties, memory bound, bad input."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from cuda_ext.knn import knn
from tests.conftest import requires_compiler, requires_gpu

DEVICES = [
    pytest.param("cpu", marks=requires_compiler),
    pytest.param("cuda", marks=[requires_gpu, requires_compiler]),
]


def points(n, seed, dtype=torch.float32, device="cpu"):
    return torch.randn(n, 3, generator=torch.Generator().manual_seed(seed), dtype=dtype).to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("k", [1, 8, 16])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_kernel_matches_twin(device, k, dtype):
    query, ref = points(3000, 0, dtype, device), points(700, 1, dtype, device)
    idx, dist2 = knn(query, ref, k, backend="kernel")
    t_idx, t_dist2 = knn(query, ref, k, backend="reference")
    assert idx.dtype == torch.int32 and idx.shape == (3000, k) and dist2.shape == (3000, k)
    torch.testing.assert_close(dist2, t_dist2, atol=1e-6, rtol=1e-6)
    # The reported distances are the distances of the reported indices, nearest first.
    recomputed = (query[:, None] - ref[idx.long()]).square().sum(-1)
    torch.testing.assert_close(dist2, recomputed, atol=1e-6, rtol=1e-6)
    assert torch.all(dist2[:, 1:] >= dist2[:, :-1])
    # Indices agree wherever the distance is not tied with a neighbour's.
    assert (idx == t_idx).float().mean() > 0.999


def brute_force(query, ref, k):
    """(idx, dist2) ordered by (distance, index): a stable sort of the full distance matrix."""
    d2 = (query[:, None] - ref[None]).square().sum(-1)
    dist, idx = torch.sort(d2, dim=1, stable=True)
    return idx[:, :k].to(torch.int32), dist[:, :k]


@requires_compiler
@pytest.mark.parametrize(
    "name, ref",
    [
        ("one point", torch.tensor([[0.5, -1.0, 2.0]])),
        ("all identical", torch.full((40, 3), 1.5)),
        ("on a plane", torch.cat([torch.rand(300, 2), torch.zeros(300, 1)], 1)),
        ("on a line", torch.linspace(0, 1, 200)[:, None] * torch.tensor([1.0, 2.0, -1.0])),
        ("integer lattice, many ties", torch.cartesian_prod(*[torch.arange(6.0)] * 3)),
        ("clustered", torch.cat([torch.randn(200, 3) * 0.01, torch.randn(50, 3) * 100])),
    ],
)
def test_cpu_grid_search_is_exact_on_awkward_layouts(name, ref):
    g = torch.Generator().manual_seed(3)
    # Queries inside the cloud, on reference points, and far outside its bounding box.
    query = torch.cat([ref[:50] + 0.3 * torch.randn(min(50, len(ref)), 3, generator=g), ref[:20],
                       ref.mean(0) + 1e3 * torch.randn(20, 3, generator=g), torch.round(4 * torch.rand(30, 3, generator=g))])
    k = min(8, len(ref))
    idx, dist2 = knn(query, ref, k, backend="kernel")
    want_idx, want_dist2 = brute_force(query, ref, k)
    torch.testing.assert_close(dist2, want_dist2, atol=0, rtol=1e-6)
    assert torch.equal(idx, want_idx), name


@requires_compiler
def test_ties_prefer_the_smaller_index_and_k_equals_m():
    ref = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [-1.0, 0, 0], [0, 0, 5.0]])
    idx, dist2 = knn(torch.zeros(1, 3), ref, 4, backend="kernel")
    assert idx.tolist() == [[0, 1, 2, 3]]
    assert dist2.tolist() == [[1.0, 1.0, 1.0, 25.0]]


def peak_rss_increase_mb(fn):
    """Run fn and return how far the resident set's high-water mark rose (Linux /proc, else skip)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    except OSError:
        pytest.skip("needs /proc/self/clear_refs to reset the peak RSS")
    status = lambda key: int(next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith(key)).split()[1])  # noqa: E731,E501
    before = status("VmRSS:")
    fn()
    return (status("VmHWM:") - before) / 1024


@requires_compiler
def test_cpu_kernel_never_builds_the_p_by_m_matrix():
    query, ref = torch.rand(100_000, 3), torch.rand(2_000, 3)  # P x M float32 would be 800 MB
    knn(query[:10], ref, 16, backend="kernel")  # build/load outside the measurement
    rise = peak_rss_increase_mb(lambda: knn(query, ref, 16, backend="kernel"))
    assert rise < 60, f"peak RSS rose by {rise:.0f} MB"  # outputs are 12.8 MB


@pytest.mark.parametrize(
    "args, argument",
    [
        ((torch.zeros(5, 2), torch.zeros(4, 3), 2), "query"),
        ((torch.zeros(5, 3), torch.zeros(4, 3, 1), 2), "ref"),
        ((torch.zeros(5, 3), torch.zeros(4, 3), 0), "k"),
        ((torch.zeros(5, 3), torch.zeros(4, 3), 5), "k"),
        ((torch.zeros(5, 3), torch.zeros(4, 3, dtype=torch.float64), 2), "ref"),
        ((torch.zeros(5, 3), torch.tensor([[0.0, float("nan"), 0]] * 4), 2), "ref"),
        ((torch.full((5, 3), float("inf")), torch.zeros(4, 3), 2), "query"),
    ],
)
@pytest.mark.parametrize("backend", [pytest.param("kernel", marks=requires_compiler), "reference"])
def test_bad_input_raises_value_error_naming_the_argument(args, argument, backend):
    with pytest.raises(ValueError, match=argument):
        knn(*args, backend=backend)


@pytest.mark.skipif(not os.environ.get("RECON4D_KNN_FULL"), reason="set RECON4D_KNN_FULL=1 (a few seconds, 1 GB)")
@requires_compiler
def test_cpu_kernel_handles_a_million_queries():
    query, ref = torch.rand(1_000_000, 3), torch.rand(10_000, 3)
    rise = peak_rss_increase_mb(lambda: knn(query, ref, 16, backend="kernel"))
    assert rise < 400, f"peak RSS rose by {rise:.0f} MB"  # outputs are 128 MB; P x M would be 40 GB
