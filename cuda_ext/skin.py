"""Fused skinning of Gaussians to the motion scaffold: ``skin()``, differentiable, CPU + CUDA.

Each Gaussian i has K node ids and K weights; each node j has a rigid transform per
frame (unit quaternion, (w, x, y, z), and translation). The Gaussian's mean and
rotation at a frame are the blend of its nodes' transforms applied to its canonical
mean and rotation, by dual-quaternion blending (``"dqb"``, the default: rigid, no
candy-wrapper collapse) or linear blending (``"lbs"``). The exact formulas are in
``cuda_ext/reference/skin.py`` (the PyTorch twin) and ``csrc/scaffold_math.h``.

Why a kernel: this runs for every Gaussian at every step, and the PyTorch version
materialises ``N x K`` node transforms that autograd keeps for the backward pass.
The kernels blend in registers, recompute the blend in the backward pass, and
accumulate node gradients per thread (CPU) or with atomics (CUDA).

Defined behaviour on awkward inputs:

* node quaternions need not be unit; they are normalised (differentiably) first;
* DQB/LBS flip every node quaternion into the hemisphere of the pivot node (the
  largest weight), so ``q`` and ``-q`` give the same result (the output quaternion
  lies in the pivot's hemisphere, so negating the pivot negates it: same rotation);
* weights need not sum to one (both modes are scale invariant per Gaussian); a row
  whose weights sum to zero has no meaningful blend and raises ``ValueError``;
* nodes referenced by no Gaussian get zero gradient; K = 1 reproduces the node's
  transform exactly;
* bad input (shape mismatch, node id outside ``[0, M)``, NaN/Inf, zero-norm node
  quaternion) raises ``ValueError`` naming the argument, before any kernel runs.

Batched time: pass ``node_quats[T, M, 4]`` and ``node_trans[T, M, 3]`` to skin the
same Gaussians at T frames in one call (the scaffold regularisers do this);
outputs are then ``[T, N, 3]`` and ``[T, N, 4]``.
"""

from __future__ import annotations

from types import ModuleType

import torch
from torch.autograd.function import once_differentiable

import cuda_ext
from cuda_ext.checks import data_checks_enabled, expect_same_float, expect_shape
from cuda_ext.reference import skin as reference

BACKENDS = ("auto", "kernel", "reference")


def kernel_module(device: torch.device, backend: str) -> ModuleType | None:
    """The compiled scaffold family for ``device``, or None when the twin should run.

    ``auto`` uses the kernel when it builds (warning once otherwise), ``kernel`` raises
    ``KernelBuildError`` when it cannot, ``reference`` always picks the twin.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "reference" or device.type not in ("cpu", "cuda"):
        if backend == "kernel":
            raise cuda_ext.KernelBuildError(f"no scaffold kernel for device type {device.type!r}")
        return None
    family = "scaffold_cuda" if device.type == "cuda" else "scaffold_cpu"
    return cuda_ext.require(family) if backend == "kernel" else cuda_ext.load(family)


class SkinFunction(torch.autograd.Function):
    """Autograd wrapper: kernel forward, kernel backward (first order only).

    Node tensors must be ``[T, M, .]`` (``skin()`` adds T = 1); node quaternions are normalised
    inside the kernels, which also project their gradient through that normalisation.
    """

    @staticmethod
    def forward(ctx, module, dqb, canon_means, canon_quats, node_ids, weights, node_quats, node_trans):
        inputs = (canon_means, canon_quats, node_ids, weights, node_quats, node_trans)
        means, quats = module.skin_forward(*inputs, dqb)
        ctx.save_for_backward(*inputs)
        ctx.module, ctx.dqb = module, dqb
        return means, quats

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_means, grad_quats):
        g_means, g_quats, g_weights, g_nq, g_nt = ctx.module.skin_backward(
            *ctx.saved_tensors, grad_means.contiguous(), grad_quats.contiguous(), ctx.dqb
        )
        return None, None, g_means, g_quats, None, g_weights, g_nq, g_nt


def validate_shapes(canon_means, canon_quats, node_ids, weights, node_quats, node_trans, mode) -> None:
    """Raise ValueError naming the argument for a wrong mode, shape, dtype or device (no data is read)."""
    if mode not in ("dqb", "lbs"):
        raise ValueError(f"mode must be 'dqb' or 'lbs', got {mode!r}")
    expect_shape("canon_means", canon_means, (None, 3))
    n = canon_means.shape[0]
    expect_shape("canon_quats", canon_quats, (n, 4))
    expect_shape("node_ids", node_ids, (n, None))
    k = node_ids.shape[1]
    if k < 1:
        raise ValueError("node_ids must have at least one column (K >= 1)")
    expect_shape("weights", weights, (n, k))
    if node_quats.dim() not in (2, 3):
        raise ValueError(f"node_quats must be [M, 4] or [T, M, 4], got {list(node_quats.shape)}")
    lead = tuple(node_quats.shape[:-2])
    expect_shape("node_quats", node_quats, (*lead, None, 4))
    m = node_quats.shape[-2]
    if m < 1:
        raise ValueError("node_quats must hold at least one node")
    expect_shape("node_trans", node_trans, (*lead, m, 3))
    expect_same_float({"canon_means": canon_means, "canon_quats": canon_quats, "weights": weights,
                       "node_quats": node_quats, "node_trans": node_trans})
    if node_ids.dtype.is_floating_point or node_ids.dtype in (torch.bool, torch.complex64, torch.complex128):
        raise ValueError(f"node_ids must be an integer tensor, got {node_ids.dtype}")
    if node_ids.device != canon_means.device:
        raise ValueError(f"node_ids is on {node_ids.device} but the other inputs are on {canon_means.device}")


def data_failures(m: int) -> list[str]:
    """Messages of the data checks, in the order of the CPU kernel's check_skin_inputs codes (1-based)."""
    return [
        "canon_means contains NaN or Inf",
        "canon_quats contains NaN or Inf",
        "weights contains NaN or Inf",
        "node_quats contains NaN or Inf",
        "node_trans contains NaN or Inf",
        f"node_ids must lie in [0, {m}) (M = number of nodes)",
        "weights: some Gaussian's weights sum to zero, so its blend is undefined",
        "node_quats contains a zero-norm quaternion",
    ]


def data_checks(canon_means, canon_quats, node_ids, weights, node_quats, node_trans) -> list[torch.Tensor]:
    """0-d ``ok`` flags for data_failures(), as torch ops (CUDA tensors and the twin's path)."""
    detached = [t.detach() for t in (canon_means, canon_quats, weights, node_quats, node_trans)]
    flags = [torch.isfinite(t).all() for t in detached]
    w = detached[2]
    if node_ids.numel():
        flags.append((node_ids.min() >= 0) & (node_ids.max() < node_quats.shape[-2]))
    else:
        flags.append(torch.ones((), dtype=torch.bool, device=w.device))
    flags.append((w.sum(-1).abs() > w.abs().sum(-1) * torch.finfo(w.dtype).eps).all())
    flags.append((detached[3].norm(dim=-1) > reference.NORM_FLOOR).all())
    return flags


def skin(
    canon_means: torch.Tensor,
    canon_quats: torch.Tensor,
    node_ids: torch.Tensor,
    weights: torch.Tensor,
    node_quats: torch.Tensor,
    node_trans: torch.Tensor,
    mode: str = "dqb",
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Skinned ``(means, quats)`` of N Gaussians at one frame (``[M, .]`` nodes) or T frames (``[T, M, .]``).

    Shapes: canon_means [N,3], canon_quats [N,4], node_ids [N,K] (any integer dtype),
    weights [N,K], node_quats [(T,) M, 4], node_trans [(T,) M, 3]. Differentiable with
    respect to every float input. ``backend``: "auto" (kernel for the tensors' device if
    it builds, else the twin), "kernel" (error if unavailable) or "reference" (the twin).
    """
    validate_shapes(canon_means, canon_quats, node_ids, weights, node_quats, node_trans, mode)
    module = kernel_module(canon_means.device, backend)
    if node_ids.dtype not in (torch.int32, torch.int64):
        node_ids = node_ids.long()
    if not data_checks_enabled():
        failed = 0
    elif module is not None and canon_means.device.type == "cpu":
        # One fused C++ pass instead of a dozen torch reductions (see check_skin_inputs).
        args = [t.contiguous() for t in (canon_means, canon_quats, node_ids, weights, node_quats, node_trans)]
        failed = module.check_skin_inputs(*[t.detach() for t in args])
    else:
        flags = data_checks(canon_means, canon_quats, node_ids, weights, node_quats, node_trans)
        failed = next((code for code, ok in enumerate(torch.stack(flags).tolist(), 1) if not ok), 0)
    if failed:
        raise ValueError(data_failures(node_quats.shape[-2])[failed - 1])
    if module is None:
        return reference.skin(canon_means, canon_quats, node_ids, weights, node_quats, node_trans, mode)
    single = node_quats.dim() == 2
    means, quats = SkinFunction.apply(
        module,
        mode == "dqb",
        canon_means.contiguous(),
        canon_quats.contiguous(),
        node_ids.to(torch.int32).contiguous(),
        weights.contiguous(),
        (node_quats[None] if single else node_quats).contiguous(),
        (node_trans[None] if single else node_trans).contiguous(),
    )
    return (means[0], quats[0]) if single else (means, quats)
