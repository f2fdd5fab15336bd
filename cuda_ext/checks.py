"""Host-side input checks shared by the kernel wrappers (skinning, k-NN).

Kernels index raw memory, so a bad node id is a segfault on CPU and an illegal
address on CUDA; NaNs silently propagate into every Gaussian that touches a node.
Every wrapper therefore checks shapes first (free) and then data (ids in range,
finite values, ...) in one batched reduction with a single device-to-host copy,
raising ``ValueError`` that names the offending argument. (On CPU, the skinning
kernel runs its data checks in C++ in one pass instead: see ``cuda_ext.skin``.)
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Iterator

import torch

FLOAT_DTYPES = (torch.float32, torch.float64)

_TRUSTED: ContextVar[bool] = ContextVar("recon4d_trusted_inputs", default=False)


@contextmanager
def trusted_inputs() -> Iterator[None]:
    """Inside the block, kernel wrappers and ``rasterize`` skip their data checks (values: finiteness,
    id ranges); shapes, dtypes and devices are still checked.

    For a caller that checks its own tensors: on a GPU every data check is a host
    sync, and the training loop, whose inputs are its own parameters, checks their
    finiteness itself every few steps (``Trainer``) instead of a dozen times a step.
    """
    token = _TRUSTED.set(True)
    try:
        yield
    finally:
        _TRUSTED.reset(token)


def data_checks_enabled() -> bool:
    return not _TRUSTED.get()


def expect_shape(name: str, tensor: torch.Tensor, shape: tuple[int | None, ...]) -> None:
    """Raise ValueError unless ``tensor`` has ``shape`` (None matches any size)."""
    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    ok = tensor.dim() == len(shape) and all(s is None or s == d for s, d in zip(shape, tensor.shape))
    if not ok:
        want = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
        raise ValueError(f"{name} must have shape {want}, got {list(tensor.shape)}")


def expect_same_float(tensors: dict[str, torch.Tensor]) -> None:
    """Raise ValueError unless all tensors are float32/float64 with one dtype and one device.

    The message names the odd ones out (those differing from the most common dtype/device).
    """
    for name, tensor in tensors.items():
        if tensor.dtype not in FLOAT_DTYPES:
            raise ValueError(f"{name} must be float32 or float64, got {tensor.dtype}")
    kinds = {name: (t.dtype, t.device) for name, t in tensors.items()}
    values = list(kinds.values())
    common = max(values, key=values.count)
    odd = [name for name, kind in kinds.items() if kind != common]
    if odd:
        found = ", ".join(f"{name}: {kinds[name][0]} on {kinds[name][1]}" for name in odd)
        raise ValueError(f"all float inputs must share one dtype and device ({common[0]} on {common[1]}); got {found}")


def raise_first_failure(checks: list[tuple[str, torch.Tensor]]) -> None:
    """Evaluate 0-d boolean ``ok`` tensors with one host sync; raise ValueError(message) for the first False."""
    if not checks or not data_checks_enabled():
        return
    flags = torch.stack([ok.reshape(()) for _, ok in checks]).tolist()
    for (message, _), ok in zip(checks, flags):
        if not ok:
            raise ValueError(message)


def finite_check(name: str, tensor: torch.Tensor) -> tuple[str, torch.Tensor]:
    return f"{name} contains NaN or Inf", torch.isfinite(tensor).all()
