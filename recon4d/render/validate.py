"""Input checks for ``rasterize``: every bad input gets an error that names the argument.

Kernels assume well-formed, contiguous, same-device tensors; checking here (on the
host, before any launch) turns segfaults and silent garbage into ValueErrors. The
value checks are skipped inside ``cuda_ext.checks.trusted_inputs`` (the training loop).
"""

from __future__ import annotations

import torch
from torch import Tensor

from cuda_ext.checks import data_checks_enabled


def _shape(name: str, t: Tensor, expected: tuple[int | None, ...], what: str) -> None:
    if not isinstance(t, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    ok = t.dim() == len(expected) and all(e is None or s == e for s, e in zip(t.shape, expected))
    if not ok:
        raise ValueError(f"{name} must have shape {what}, got {tuple(t.shape)}")


def _finite(name: str, t: Tensor) -> None:
    if not torch.isfinite(t).all():
        bad = (~torch.isfinite(t)).any(dim=-1) if t.dim() > 1 else ~torch.isfinite(t)
        raise ValueError(f"{name} contains NaN or inf (first bad row: {int(bad.nonzero()[0, 0])})")


def check_rasterize_inputs(inputs: dict[str, Tensor | None], width: int, height: int) -> Tensor:
    """Validate shapes, devices, dtypes and values of ``rasterize``'s tensors, given by argument name (so
    each error names its argument); returns ``features`` (possibly [C,N,D])."""
    means, quats, scales, opacities = inputs["means"], inputs["quats"], inputs["scales"], inputs["opacities"]
    features, viewmats, Ks, backgrounds = inputs["features"], inputs["viewmats"], inputs["Ks"], inputs["backgrounds"]
    for name, value in (("width", width), ("height", height)):
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive int (zero-area images cannot be rendered), got {value!r}")
    _shape("means", means, (None, 3), "[N, 3]")
    N = means.shape[0]
    _shape("quats", quats, (N, 4), f"[N={N}, 4]")
    _shape("scales", scales, (N, 3), f"[N={N}, 3]")
    _shape("opacities", opacities, (N,), f"[N={N}]")
    _shape("viewmats", viewmats, (None, 4, 4), "[C, 4, 4]")
    C = viewmats.shape[0]
    _shape("Ks", Ks, (C, 3, 3), f"[C={C}, 3, 3]")
    if features.dim() == 2:
        _shape("features", features, (N, None), f"[N={N}, D] or [C={C}, N={N}, D]")
    else:
        _shape("features", features, (C, N, None), f"[N={N}, D] or [C={C}, N={N}, D]")
    if features.shape[-1] == 0:
        raise ValueError("features must have at least one channel (D >= 1)")
    D = features.shape[-1]
    if backgrounds is not None and tuple(backgrounds.shape) not in {(D,), (C, D)}:
        raise ValueError(f"backgrounds must have shape [D={D}] or [C={C}, D={D}], got {tuple(backgrounds.shape)}")

    named = {name: t for name, t in inputs.items() if t is not None}
    device = means.device
    for name, t in named.items():
        if t.device != device:
            raise ValueError(f"{name} is on {t.device} but means is on {device}; put all inputs on one device")
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
        if t.dtype != means.dtype:
            raise ValueError(f"{name} has dtype {t.dtype} but means has {means.dtype}; use one dtype")
    if data_checks_enabled():
        _check_values(named, quats)
    return features


def _check_values(named: dict[str, Tensor], quats: Tensor) -> None:
    """NaN/inf and zero quaternions, all tested in one reduction (one host sync on a GPU); the slow,
    per-argument tests run only to name the culprit."""
    checked = ("means", "scales", "quats", "opacities", "viewmats", "Ks")
    flags = [torch.isfinite(named[name]).all() for name in checked]
    if len(quats):
        flags.append((quats.norm(dim=-1) != 0).all())
    if bool(torch.stack(flags).all()):
        return
    for name in checked:
        _finite(name, named[name])
    raise ValueError("quats contains a zero quaternion (cannot be normalised)")
