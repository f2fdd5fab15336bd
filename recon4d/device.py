"""Which device a command computes on, and whether the GPU path can run there, decided before any work.

Why here and up front: a GPU whose driver is too old for torch's CUDA build makes
``torch.cuda.is_available()`` false, and "auto" would then fit on the CPU for hours
without a word; gsplat without its compiled kernels fails at the first render with an
``AttributeError``, after the priors. Both are one clear line (``GpuSetupError``)
before the work starts.
"""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path

import torch

from recon4d.errors import UserError

NVIDIA_DRIVER_FILE = Path("/proc/driver/nvidia/version")


class GpuSetupError(UserError, RuntimeError):
    """The GPU path cannot run on this machine; the message says what to install or pass."""


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` (CUDA when usable), ``cpu``, ``cuda`` or ``cuda:N``; a GPU torch cannot use is an error,
    never a silent switch to the CPU."""
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if reason := unusable_gpu():
            raise GpuSetupError(f"{reason}; or pass --device cpu to run on the CPU")
        return torch.device("cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise GpuSetupError(f"--device {name!r} is not a device (use auto, cpu, cuda or cuda:N): {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise GpuSetupError(f"--device {name}: {unusable_gpu() or 'this machine has no CUDA GPU'}")
    return device


def unusable_gpu() -> str | None:
    """Why an NVIDIA GPU on this machine is not usable by this torch; None when there is no GPU to use."""
    if not NVIDIA_DRIVER_FILE.exists():
        return None
    found = re.search(r"Kernel Module\s+([\d.]+)", NVIDIA_DRIVER_FILE.read_text(errors="replace"))
    driver = found.group(1) if found else "unknown"
    if torch.version.cuda is None:
        return (f"an NVIDIA GPU is present (driver {driver}) but torch {torch.__version__} is a CPU-only build; "
                f"install torch's CUDA build")
    return (f"an NVIDIA GPU is present (driver {driver}) but torch {torch.__version__} (built for CUDA "
            f"{torch.version.cuda}) cannot use it: the driver is probably older than CUDA {torch.version.cuda} "
            f"needs; update the NVIDIA driver")


@functools.cache
def gsplat_kernels():
    """gsplat's compiled CUDA module, built now if it must be (minutes, once per torch version and GPU
    architecture; see ``recon4d.kernels``); GpuSetupError when it cannot be built."""
    from recon4d.kernels import gsplat_build_env

    with gsplat_build_env():
        try:
            backend = importlib.import_module("gsplat.cuda._backend")
        except ImportError as exc:
            raise GpuSetupError(f"gsplat is not installed ({exc}); install it with `pip install -e .`") from None
    if getattr(backend, "_C", None) is None:
        raise GpuSetupError(
            "gsplat's CUDA kernels are not built and cannot be built here: no CUDA toolkit (nvcc) was found. "
            f"Install the CUDA {torch.version.cuda or '13'} toolkit (its nvcc must match torch's CUDA build), "
            "set CUDA_HOME, and run `recon4d build`; or pass --device cpu (or --config.backend torch: slow, "
            "on the GPU)")
    return backend._C


def check_gpu_path(device: torch.device, backend: str = "auto") -> None:
    """Before a CUDA run that rasterizes with gsplat: its kernels are there (built if need be)."""
    if device.type == "cuda" and backend in ("auto", "gsplat"):
        gsplat_kernels()
