"""`recon4d bench skin`: forward+backward of the fused skinning kernel vs its PyTorch twin.

Headline case: N = 200k Gaussians, K = 8 nodes each, M = 4096 nodes, one frame, float32,
DQB, on the CPU threads torch uses. Both variants run in the same invocation on the same
inputs; the last two lines are ``speedup=<twin time / kernel time>`` and
``mem_ratio=<twin peak / kernel peak>``.

Time: best of ``repeats`` forward+backward passes after one warm-up, kernel and twin
alternating so that other load on a shared machine affects both alike (the best pass is
the one least disturbed). Input validation is included: it is part of every real call.

Peak memory: each variant runs in a fresh subprocess with glibc's mmap threshold lowered
(``MALLOC_MMAP_THRESHOLD_``) so freed buffers go back to the OS and the resident set
tracks live memory. The worker builds the inputs, runs one warm-up pass, frees its
gradients, resets the kernel's peak-RSS counter (``/proc/self/clear_refs``), runs one
forward+backward and reports ``VmHWM - VmRSS``: every byte the pass itself added at its
peak (outputs, autograd buffers, gradients, the kernels' own scratch), not the inputs.
Without ``clear_refs`` (non-Linux) it falls back to the rise of ``ru_maxrss`` over the
pass, without a warm-up. On a GPU the same pair is measured on CUDA with
``torch.cuda.max_memory_allocated`` (all CUDA memory goes through torch's allocator).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tyro


@dataclass
class BenchSkinConfig:
    """Benchmark fused skinning (kernel) against the PyTorch twin, forward + backward."""

    quick: bool = False
    """Smaller case (N=20k, M=512) that finishes in well under 45 s."""
    n: int = 200_000
    """Gaussians."""
    k: int = 8
    """Nodes per Gaussian."""
    m: int = 4096
    """Scaffold nodes."""
    mode: str = "dqb"
    """Blend: dqb or lbs."""
    repeats: int = 5
    """Timed passes per variant (best reported)."""


def make_inputs(n: int, k: int, m: int, device: str = "cpu", seed: int = 0):
    """Random skinning inputs (float32, requiring grad) and upstream gradients for (means, quats)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    inputs = {
        "canon_means": torch.randn(n, 3, generator=g),
        "canon_quats": torch.randn(n, 4, generator=g),
        "node_ids": torch.randint(0, m, (n, k), generator=g, dtype=torch.int32),
        "weights": torch.rand(n, k, generator=g).add_(0.05),
        "node_quats": torch.randn(m, 4, generator=g),
        "node_trans": torch.randn(m, 3, generator=g),
    }
    upstream = (torch.randn(n, 3, generator=g).to(device), torch.randn(n, 4, generator=g).to(device))
    inputs = {name: t.to(device).requires_grad_(t.is_floating_point()) for name, t in inputs.items()}
    return inputs, upstream


def forward_backward(inputs, upstream, mode: str, backend: str) -> None:
    import torch

    from cuda_ext.skin import skin

    for t in inputs.values():
        t.grad = None
    outputs = skin(**inputs, mode=mode, backend=backend)
    torch.autograd.backward(outputs, upstream)


def _proc_kb(key: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    raise KeyError(key)


def probe_memory(cfg: BenchSkinConfig, backend: str) -> dict:
    """Worker side: peak bytes one forward+backward adds above the inputs (see module docstring)."""
    inputs, upstream = make_inputs(cfg.n, cfg.k, cfg.m)
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        forward_backward(inputs, upstream, cfg.mode, backend)
        scale = 1 if sys.platform == "darwin" else 1024  # ru_maxrss is bytes on macOS, KiB on Linux
        return {"peak_bytes": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * scale,
                "method": "ru_maxrss"}
    forward_backward(inputs, upstream, cfg.mode, backend)  # warm-up: kernel load, thread pool
    for t in inputs.values():
        t.grad = None
    Path("/proc/self/clear_refs").write_text("5")
    before = _proc_kb("VmRSS:")
    forward_backward(inputs, upstream, cfg.mode, backend)
    return {"peak_bytes": (_proc_kb("VmHWM:") - before) * 1024, "method": "VmHWM"}


def measure_memory(cfg: BenchSkinConfig, backend: str) -> dict:
    """Run probe_memory in a fresh interpreter so the variant's peak is its own."""
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536")
    args = [sys.executable, "-m", "recon4d.bench.skin", "--probe", backend, "--n", str(cfg.n), "--k", str(cfg.k),
            "--m", str(cfg.m), "--mode", cfg.mode]
    result = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"memory probe for {backend} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def time_pair(cfg: BenchSkinConfig, device: str) -> dict[str, float]:
    """Best forward+backward seconds of kernel and twin, alternating, after one warm-up each."""
    import torch

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    inputs, upstream = make_inputs(cfg.n, cfg.k, cfg.m, device)
    times: dict[str, list[float]] = {"kernel": [], "reference": []}
    for backend in times:
        forward_backward(inputs, upstream, cfg.mode, backend)
    for _ in range(cfg.repeats):
        for backend, samples in times.items():
            sync()
            start = time.perf_counter()
            forward_backward(inputs, upstream, cfg.mode, backend)
            sync()
            samples.append(time.perf_counter() - start)
    return {backend: min(samples) for backend, samples in times.items()}


def cuda_memory(cfg: BenchSkinConfig, backend: str) -> int:
    """Peak CUDA bytes one forward+backward allocates above the inputs."""
    import torch

    inputs, upstream = make_inputs(cfg.n, cfg.k, cfg.m, "cuda")
    forward_backward(inputs, upstream, cfg.mode, backend)
    for t in inputs.values():
        t.grad = None
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    forward_backward(inputs, upstream, cfg.mode, backend)
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - base


def main(argv: list[str]) -> int:
    probe = None
    if "--probe" in argv:  # internal: memory worker (see measure_memory)
        at = argv.index("--probe")
        probe, argv = argv[at + 1], argv[:at] + argv[at + 2 :]
    cfg = tyro.cli(BenchSkinConfig, args=argv)
    if cfg.quick:
        cfg.n, cfg.m, cfg.repeats = 20_000, 512, 3
    if cfg.mode not in ("dqb", "lbs"):
        raise SystemExit(f"--mode must be dqb or lbs, got {cfg.mode!r}")
    if probe is not None:
        print(json.dumps(probe_memory(cfg, probe)))
        return 0

    import torch

    import cuda_ext

    cuda_ext.require("scaffold_cpu")  # build (or fail) before anything is timed
    print(f"skin {cfg.mode}: N={cfg.n} K={cfg.k} M={cfg.m}, forward+backward, float32, "
          f"{torch.get_num_threads()} CPU threads, best of {cfg.repeats}")
    if torch.cuda.is_available():
        cuda_ext.require("scaffold_cuda")
        t = time_pair(cfg, "cuda")
        mem = {backend: cuda_memory(cfg, backend) for backend in t}
        print(f"  cuda   kernel {t['kernel'] * 1e3:9.2f} ms {mem['kernel'] / 2**20:9.1f} MB | "
              f"twin {t['reference'] * 1e3:9.2f} ms {mem['reference'] / 2**20:9.1f} MB")
        print(f"cuda_speedup={t['reference'] / t['kernel']:.2f}")
        print(f"cuda_mem_ratio={mem['reference'] / mem['kernel']:.2f}")
    t = time_pair(cfg, "cpu")
    mem = {backend: measure_memory(cfg, backend) for backend in t}
    print(f"  cpu    kernel {t['kernel'] * 1e3:9.2f} ms {mem['kernel']['peak_bytes'] / 2**20:9.1f} MB | "
          f"twin {t['reference'] * 1e3:9.2f} ms {mem['reference']['peak_bytes'] / 2**20:9.1f} MB "
          f"(peak memory above inputs, {mem['kernel']['method']} in a fresh process per variant)")
    print(f"speedup={t['reference'] / t['kernel']:.2f}")
    print(f"mem_ratio={mem['reference']['peak_bytes'] / max(1, mem['kernel']['peak_bytes']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
