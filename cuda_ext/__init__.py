"""Build, load and fall back for recon4d's custom kernels.

Kernels are grouped in small extension modules ("families") so that each one
compiles on its own and a change to one kernel does not rebuild the others:

* ``rasterize_cpu`` – tile-based Gaussian rasterizer, forward and backward (C++/OpenMP).
* ``project_cpu`` / ``project_cpu_native`` – the EWA projection that feeds it (C++/OpenMP): the forward
  built to round as its twin does, the backward built for this CPU.
* ``scaffold_cpu`` / ``scaffold_cuda`` – skinning and k-NN for the motion scaffold.
* ``ssim_cpu`` – the SSIM term of the losses, forward and backward (C++/OpenMP).

``load(name)`` compiles a family on first use through torch's extension builder
(ninja, cached by source hash), and returns ``None`` with a one-line warning when
it cannot be built, so callers use the PyTorch twin in ``cuda_ext.reference``.
Users never run a separate build step.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import hashlib
import os
import shutil
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Iterator

CSRC = Path(__file__).resolve().parent / "csrc"

# Architectures we compile CUDA code for when no GPU is visible (CI, login nodes):
# A100 (sm_80) and H100/H200 (sm_90), the machines our users train on.
DEFAULT_CUDA_ARCHS = "8.0;9.0"


@dataclass(frozen=True)
class Family:
    """One extension module: its sources and whether it needs nvcc."""

    sources: tuple[str, ...]
    cuda: bool = False
    extra_cflags: tuple[str, ...] = field(default=("-O3", "-fopenmp"))
    extra_ldflags: tuple[str, ...] = field(default=("-fopenmp",))
    native: bool = False
    """Compile for this CPU (-march=native). Off where results must be bit-exact with the twin
    (FMA contraction reorders float sums, e.g. k-NN tie-breaking on equal distances)."""


FAMILIES: dict[str, Family] = {
    "rasterize_cpu": Family(sources=("cpu/rasterize.cpp",), native=True),
    # The projection twice from one source: the forward from a build without fused multiply-adds, which must
    # round as the PyTorch twin does (see the file's header); the backward from a native one, where AVX2 and
    # FMA make it twice as fast.
    "project_cpu": Family(sources=("cpu/project.cpp",), extra_cflags=("-O3", "-fopenmp", "-ffp-contract=off")),
    "project_cpu_native": Family(sources=("cpu/project.cpp",), native=True),
    "scaffold_cpu": Family(sources=("cpu/scaffold.cpp",)),
    "ssim_cpu": Family(sources=("cpu/ssim.cpp",), native=True),
    # The .cu holds every scaffold CUDA kernel and includes no torch header (fast nvcc);
    # the bindings .cpp is the only translation unit that parses torch.
    "scaffold_cuda": Family(sources=("cuda/scaffold.cu", "cuda/scaffold_bindings.cpp"), cuda=True),
}


class KernelBuildError(RuntimeError):
    """Raised by ``build`` when a family cannot be compiled (load() turns it into a fallback)."""


def build_root() -> Path:
    """Where compiled kernels are cached.

    ``RECON4D_BUILD_DIR`` wins; otherwise ``cuda_ext/.build`` next to the sources when it
    is writable (editable installs, CI), else ``$XDG_CACHE_HOME/recon4d``.
    """
    if env := os.environ.get("RECON4D_BUILD_DIR"):
        return Path(env)
    local = CSRC.parent / ".build"
    try:
        local.mkdir(parents=True, exist_ok=True)
        probe = local / ".write_probe"
        probe.touch()
        probe.unlink()
        return local
    except OSError:
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        return cache / "recon4d" / "torch_extensions"


@contextmanager
def build_lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on ``folder``'s build while the body runs.

    Why: N Ray workers starting together on one shared file system would each
    compile into, and clean up, the same folder. ``lockf`` (POSIX record locks)
    is what NFS's lock manager honours; ``flock`` is not, on many mounts.
    """
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.with_name(folder.name + ".lock"), "a+") as handle:
        fcntl.lockf(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(handle, fcntl.LOCK_UN)


def torch_key() -> str:
    """torch's version as a folder-name part: builds for one torch never load into another."""
    import torch

    return "torch" + torch.__version__.replace("+", "_")


def cuda_archs() -> str:
    """The GPU architectures a CUDA build targets: ``TORCH_CUDA_ARCH_LIST`` if set, else this machine's
    GPU, else ``DEFAULT_CUDA_ARCHS`` (CI, login nodes)."""
    import torch

    if archs := os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return archs
    if torch.cuda.is_available():
        return "{}.{}".format(*torch.cuda.get_device_capability())
    return DEFAULT_CUDA_ARCHS


def cuda_arch_key() -> str:
    """``cuda_archs()`` as a folder-name key, e.g. ``sm80-90``."""
    return "sm" + "-".join(a.replace(".", "") for a in cuda_archs().replace(" ", ";").split(";") if a)


def missing_toolchain(family: Family) -> str | None:
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        return "no C++ compiler on PATH (install g++ or set CXX)"
    if family.cuda:
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        if cuda_home is None and Path("/usr/local/cuda").exists():
            os.environ["CUDA_HOME"] = "/usr/local/cuda"
            cuda_home = "/usr/local/cuda"
        if cuda_home is None or not (Path(cuda_home) / "bin" / "nvcc").exists():
            return "no CUDA toolkit found (set CUDA_HOME to a directory with bin/nvcc)"
        import torch

        if torch.version.cuda is None:
            return f"this torch ({torch.__version__}) is a CPU-only build"
    return None


def _cpu_signature() -> str:
    """Short hash of the processor's feature flags (Linux /proc/cpuinfo; the platform elsewhere)."""
    import platform

    try:
        flags = next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags"))
    except (OSError, StopIteration):
        flags = platform.processor() or platform.machine()
    return hashlib.sha1(flags.encode()).hexdigest()[:6]


def build(name: str, verbose: bool = False) -> ModuleType:
    """Compile (or fetch from cache) one kernel family; raise KernelBuildError on failure."""
    if name not in FAMILIES:
        raise KeyError(f"unknown kernel family {name!r}; known: {sorted(FAMILIES)}")
    family = FAMILIES[name]
    if reason := missing_toolchain(family):
        raise KernelBuildError(f"cannot build {name}: {reason}")

    import torch

    # torch warns at import that a CPU-only machine has "no CUDA runtime"; for CPU kernels
    # (and for compiling CUDA code without a GPU, as CI does) that is expected, not news.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    from torch.utils import cpp_extension

    if family.cuda:  # torch fixed its CUDA_HOME at import, maybe before missing_toolchain chose one
        cpp_extension.CUDA_HOME = os.environ.get("CUDA_HOME") or os.environ["CUDA_PATH"]

    root = build_root()
    root.mkdir(parents=True, exist_ok=True)
    # torch also reads this for its own lock files; keep them out of the home directory.
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(root))
    if family.cuda and not torch.cuda.is_available():
        os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_CUDA_ARCHS)
    # torch's ninja flags embed its include path, which differs between a venv reached
    # through a symlink and its real path, and the ninja file names the sources by their path,
    # which differs between two checkouts sharing RECON4D_BUILD_DIR (git worktrees): one
    # directory per pair of paths avoids rebuild ping-pong (each rebuild was ~75 s on 2 cores).
    paths = f"{Path(torch.__file__).parent}|{CSRC}"
    build_dir = root / f"{name}_{torch_key()}_{hashlib.sha1(paths.encode()).hexdigest()[:8]}"
    cflags = list(family.extra_cflags)
    if family.native:
        # Tuned for this machine's vector units (AVX2/AVX-512, FMA); the build folder is keyed
        # by the CPU's feature flags so nodes of a cluster sharing a file system never load a
        # build made for another processor.
        cflags.append("-march=native")
        build_dir = build_dir.with_name(f"{build_dir.name}_cpu{_cpu_signature()}")
    if family.cuda:  # A100 and H100 nodes sharing a file system each keep their own build
        build_dir = build_dir.with_name(f"{build_dir.name}_{cuda_arch_key()}")
    build_dir.mkdir(parents=True, exist_ok=True)
    try:
        with build_lock(build_dir):
            return cpp_extension.load(
                name=f"recon4d_{name}",
                sources=[str(CSRC / s) for s in family.sources],
                extra_cflags=cflags,
                extra_cuda_cflags=["-O3", "--use_fast_math"] if family.cuda else None,
                extra_ldflags=list(family.extra_ldflags),
                build_directory=str(build_dir),
                with_cuda=family.cuda,
                verbose=verbose,
            )
    except Exception as exc:  # compiler errors surface as RuntimeError/OSError/CalledProcessError
        raise KernelBuildError(f"building {name} failed: {exc}") from exc


@functools.cache
def _build_once(name: str) -> tuple[ModuleType | None, str | None]:
    if os.environ.get("RECON4D_DISABLE_KERNELS"):
        return None, "kernels disabled by RECON4D_DISABLE_KERNELS"
    try:
        return build(name), None
    except KernelBuildError as exc:
        return None, str(exc)


def require(name: str) -> ModuleType:
    """Return the compiled family or raise KernelBuildError saying why it is unavailable."""
    module, error = _build_once(name)
    if module is None:
        raise KernelBuildError(error)
    return module


@functools.cache
def load(name: str) -> ModuleType | None:
    """Return the compiled family, or None (after one warning) so callers use the twin."""
    module, error = _build_once(name)
    if module is None:
        warnings.warn(f"recon4d: {error}; using the PyTorch reference instead (slower)", stacklevel=2)
    return module
