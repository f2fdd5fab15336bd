"""Build every compiled kernel before the work starts: ``recon4d build`` (also run by ``make setup``).

Two sets: recon4d's own families (``cuda_ext``: the CPU rasterizer and scaffold
kernels, and the scaffold's CUDA kernels where nvcc exists), and gsplat's CUDA
kernels, which gsplat otherwise compiles at its first call, 5-15 minutes into a
fit. gsplat's build folder is keyed by torch version and GPU architecture and built
under a file lock: gsplat deletes its lock file on import and removes its build
folder until the module exists, so workers starting together on a shared file
system would otherwise undo each other's builds.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import cuda_ext


def gsplat_build_folder() -> Path:
    return cuda_ext.build_root() / f"gsplat_{cuda_ext.torch_key()}_{cuda_ext.cuda_arch_key()}"


@contextmanager
def gsplat_build_env() -> Iterator[None]:
    """While gsplat is imported (and compiles), point torch's extension folder at our keyed folder and hold
    its lock; the environment is restored afterwards."""
    folder = gsplat_build_folder()
    saved = {k: os.environ.get(k) for k in ("TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST")}
    os.environ["TORCH_EXTENSIONS_DIR"] = str(folder)
    os.environ["TORCH_CUDA_ARCH_LIST"] = cuda_ext.cuda_archs()
    try:
        with cuda_ext.build_lock(folder):
            yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def build_family(name: str) -> str:
    """Build (or find built) one kernel family: "ok", or why it is not built."""
    try:
        cuda_ext.build(name)
        return "ok"
    except cuda_ext.KernelBuildError as exc:
        return str(exc)


def build_all(with_gsplat: bool, log=print) -> dict[str, str]:
    """Build (or find built) every kernel family, and gsplat's kernels if ``with_gsplat``; returns
    name -> "ok" or the reason it is not built (a CUDA family on a machine without nvcc, say)."""
    import torch

    from recon4d.device import GpuSetupError, gsplat_kernels

    results = {}
    # One compiler per core: each family is one or two translation units, and the torch headers make each
    # a minute's work for one core (6 families on 2 cores: 3.0 -> 1.6 minutes). Spawned, not forked: the
    # workers start without this process's threads and locks.
    workers = min(len(cuda_ext.FAMILIES), os.cpu_count() or 1)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        for name, result in zip(cuda_ext.FAMILIES, pool.map(build_family, cuda_ext.FAMILIES)):
            results[name] = result
            log(f"{name}: {result}")
    if not with_gsplat:
        results["gsplat"] = "skipped (no GPU visible; `recon4d build --gsplat yes` builds it anyway)"
    elif torch.version.cuda is None:
        results["gsplat"] = f"skipped: torch {torch.__version__} is a CPU-only build"
    else:
        log(f"gsplat: building into {gsplat_build_folder()} (5-15 minutes the first time)")
        try:
            gsplat_kernels()
            results["gsplat"] = "ok"
        except GpuSetupError as exc:
            results["gsplat"] = str(exc)
    log(f"gsplat: {results['gsplat']}")
    return results
