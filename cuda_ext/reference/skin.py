"""PyTorch twin of the fused skinning kernel (DQB and LBS), plain autograd.

This is the readable statement of what ``cuda_ext.skin.skin`` computes, and the
fallback where the kernels cannot be built. It gathers each Gaussian's K node
transforms into ``[T, N, K, ...]`` tensors, which autograd keeps for the backward
pass; that memory is what the fused kernels avoid.

Blend, per Gaussian (quaternions are (w, x, y, z)):

* node quaternions are normalised; the pivot is the node with the largest weight
  (the first one on ties) and every node quaternion is flipped into the pivot's
  hemisphere (``q`` and ``-q`` are the same rotation, but blending them cancels);
* ``b0 = sum_k w_k s_k q_k``, ``c0 = b0 / max(|b0|, 1e-12)``; the output rotation is
  ``c0 * canon_quat`` (so the canonical quaternion's norm passes through);
* DQB mean: the dual part ``be = sum_k w_k s_k 0.5 (0, t_k) q_k`` is divided by the
  same norm and the point is moved by the blended unit dual quaternion;
* LBS mean: ``sum_k w_k (R_k x + t_k) / sum_k w_k``.

Both modes are invariant to a per-Gaussian scale of the weights, so weights need
not be normalised; the public API rejects rows whose weights sum to zero.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NORM_FLOOR = 1e-12  # same floor as the kernels (scaffold_math.h)


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product of (..., 4) quaternions in (w, x, y, z) order."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def quat_conj(q: torch.Tensor) -> torch.Tensor:
    return q * q.new_tensor([1.0, -1.0, -1.0, -1.0])


def quat_rotate(q: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Rotate (..., 3) points by unit (..., 4) quaternions: x + 2w (v x x) + 2 v x (v x x)."""
    lead = torch.broadcast_shapes(q.shape[:-1], x.shape[:-1])
    q, x = q.expand(*lead, 4), x.expand(*lead, 3)
    w, v = q[..., :1], q[..., 1:]
    c = torch.linalg.cross(v, x, dim=-1)
    return x + 2.0 * w * c + 2.0 * torch.linalg.cross(v, c, dim=-1)


def skin(
    canon_means: torch.Tensor,
    canon_quats: torch.Tensor,
    node_ids: torch.Tensor,
    weights: torch.Tensor,
    node_quats: torch.Tensor,
    node_trans: torch.Tensor,
    mode: str = "dqb",
) -> tuple[torch.Tensor, torch.Tensor]:
    """Skin N Gaussians to a scaffold at one frame ([M, .] node tensors) or T frames ([T, M, .]).

    Returns ``(means, quats)`` shaped ``[N, 3], [N, 4]`` or ``[T, N, 3], [T, N, 4]``.
    Inputs are not validated here; ``cuda_ext.skin.skin`` does that for every backend.
    """
    if mode not in ("dqb", "lbs"):
        raise ValueError(f"mode must be 'dqb' or 'lbs', got {mode!r}")
    ids = node_ids.long()
    q = F.normalize(node_quats, dim=-1, eps=NORM_FLOOR)[..., ids, :]  # [(T,) N, K, 4]
    t = node_trans[..., ids, :]  # [(T,) N, K, 3]
    pivot = weights.argmax(dim=-1)  # [N]
    q_pivot = q[..., torch.arange(len(pivot), device=pivot.device), pivot, :].unsqueeze(-2)
    sign = torch.where((q * q_pivot).sum(-1) >= 0, 1.0, -1.0).to(q.dtype)
    ws = (weights * sign).unsqueeze(-1)  # [(T,) N, K, 1]

    b0 = (ws * q).sum(-2)
    n = b0.norm(dim=-1, keepdim=True).clamp_min(NORM_FLOOR)
    c0 = b0 / n
    quats = quat_mul(c0, canon_quats)
    if mode == "dqb":
        dual = 0.5 * quat_mul(F.pad(t, (1, 0)), q)
        ce = (ws * dual).sum(-2) / n
        means = quat_rotate(c0, canon_means) + 2.0 * quat_mul(ce, quat_conj(c0))[..., 1:]
    else:
        moved = quat_rotate(q, canon_means.unsqueeze(-2)) + t
        means = (weights.unsqueeze(-1) * moved).sum(-2) / weights.sum(-1, keepdim=True)
    return means, quats
