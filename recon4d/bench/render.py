"""`recon4d bench render`: forward+backward of the CPU rasterizer kernel vs its PyTorch twin (and gsplat on a GPU).

Every case runs in a fresh subprocess so that its peak memory is its own: the worker
builds the scene, records its resident set size, renders (forward + backward), and
reports the peak RSS above that baseline (``ru_maxrss`` of the process). Times are the
best of ``repeats`` runs after one warm-up. The ratio line compares kernel and twin on
the same scene in the same invocation; the scaling rows show that the kernel's
memory grows with N (linearly), not with N x pixels.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

import tyro


@dataclass
class BenchRenderConfig:
    """Benchmark the CPU rasterizer against its PyTorch twin."""

    quick: bool = False
    """Smaller case (N=20k, 240x135) that finishes in well under 45 s."""
    n: int = 100_000
    """Gaussians in the headline case."""
    width: int = 480
    height: int = 270
    channels: int = 35
    """Feature channels (RGB + a 32-channel latent)."""
    scaling: tuple[int, ...] = (10_000, 100_000, 1_000_000)
    """N values for the kernel's scaling rows (empty to skip)."""
    repeats: int = 2


@dataclass
class Case:
    backend: str
    n: int
    width: int
    height: int
    channels: int
    repeats: int


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run_case(case: Case) -> dict:
    """Render one scene forward+backward; runs inside the worker subprocess."""
    import torch

    from recon4d.bench.scenes import random_gaussians
    from recon4d.render import rasterize

    torch.manual_seed(0)
    params, viewmats, Ks = random_gaussians(case.n, case.channels, case.width, case.height)
    on_gpu = case.backend == "gsplat"
    if on_gpu:  # peak memory is then the CUDA allocator's, times wait for the device
        params, viewmats, Ks = [p.cuda() for p in params], viewmats.cuda(), Ks.cuda()
    if case.backend in ("cpu", "gsplat"):  # build/load outside the timed region
        rasterize(*params, viewmats, Ks, 8, 8, backend=case.backend)
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    baseline = torch.cuda.memory_allocated() / 2**20 if on_gpu else _rss_mb()
    times_f, times_b = [], []
    for _ in range(case.repeats + 1):
        leaves = [p.detach().requires_grad_(True) for p in params]
        sync()
        t0 = time.perf_counter()
        out = rasterize(*leaves, viewmats, Ks, case.width, case.height, backend=case.backend)
        sync()
        t1 = time.perf_counter()
        (out.features.sum() + out.depth.sum() + out.alpha.sum()).backward()
        sync()
        t2 = time.perf_counter()
        times_f.append(t1 - t0)
        times_b.append(t2 - t1)
        coverage = float(out.alpha.mean())
        del out, leaves
    peak = (torch.cuda.max_memory_allocated() / 2**20 if on_gpu
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # KiB -> MiB on Linux
    fwd, bwd = min(times_f[1:]), min(times_b[1:])
    return {**asdict(case), "fwd_s": fwd, "bwd_s": bwd, "total_s": fwd + bwd,
            "peak_mb": max(peak - baseline, 0.0), "coverage": coverage}


def _spawn(case: Case) -> dict:
    cmd = [sys.executable, "-m", "recon4d.bench.render", "--worker", json.dumps(asdict(case))]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"benchmark worker failed for {case}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _row(label: str, r: dict) -> str:
    return (f"{label:<12} {r['n']:>9,d} {r['fwd_s']:>8.3f} {r['bwd_s']:>8.3f} {r['total_s']:>8.3f} "
            f"{r['peak_mb']:>9.1f}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        print(json.dumps(run_case(Case(**json.loads(argv[1])))))
        return 0
    cfg = tyro.cli(BenchRenderConfig, args=argv, prog="recon4d bench render")
    if cfg.quick:
        cfg.n, cfg.width, cfg.height, cfg.scaling, cfg.repeats = 20_000, 240, 135, (), 1
    import torch

    print(f"recon4d bench render: {cfg.width}x{cfg.height}, D={cfg.channels}, forward+backward, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    header = f"{'backend':<12} {'N':>9} {'fwd_s':>8} {'bwd_s':>8} {'total_s':>8} {'peak_MiB':>9}"
    print(header)
    kernel = _spawn(Case("cpu", cfg.n, cfg.width, cfg.height, cfg.channels, cfg.repeats))
    print(_row("cpu kernel", kernel), flush=True)
    twin = _spawn(Case("torch", cfg.n, cfg.width, cfg.height, cfg.channels, 1))
    print(_row("torch twin", twin), flush=True)
    print(f"coverage (mean alpha): {kernel['coverage']:.2f}")
    if cfg.scaling:
        print("\nscaling of the cpu kernel (memory should grow ~linearly in N):")
        print(header + f" {'KiB/gauss':>9}")
        for n in cfg.scaling:
            r = _spawn(Case("cpu", n, cfg.width, cfg.height, cfg.channels, 1))
            print(_row("cpu kernel", r) + f" {r['peak_mb'] * 1024 / n:>9.3f}", flush=True)
    gsplat = None
    if torch.cuda.is_available():
        gsplat = _spawn(Case("gsplat", cfg.n, cfg.width, cfg.height, cfg.channels, cfg.repeats))
        print("\n" + header + "  (gsplat on " + torch.cuda.get_device_name() + "; peak = CUDA allocator)")
        print(_row("gsplat", gsplat), flush=True)
    print(f"mem_ratio_vs_twin={twin['peak_mb'] / max(kernel['peak_mb'], 1e-6):.2f}")
    print(f"ratio_vs_twin={twin['total_s'] / kernel['total_s']:.2f}")
    if gsplat is not None:
        print(f"ratio_gsplat_vs_cpu={kernel['total_s'] / gsplat['total_s']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
