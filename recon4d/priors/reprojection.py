"""The bundle adjustment's reprojection (a track seen at ``uv_ref`` in its reference frame, at inverse depth
``rho`` along that pixel's ray, projected into another frame) and its exact derivatives, per observation.

Why by hand rather than by autograd: the sparse Jacobian needs each observation's own derivatives, so
autograd had to run on per-observation copies of both frames' rotation vectors (Rodrigues' formula on tens
of thousands of rows where a clip has 50-100 frames), twice per Jacobian: about 60 % of a camera solve.
Here each frame's rotation and its left Jacobian are computed once, and every observation's derivatives
follow from a few batched 3x3 products. The test suite holds them against autograd.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from recon4d.geometry import rodrigues_torch, skew

MIN_DEPTH = 1e-6
"""Depths are clamped here before the division (a point behind the camera projects far away, not to infinity)."""


@dataclass
class Observations:
    """Which frame sees which point: ``frame [M]`` observes the point of reference frame ``ref [M]``, reference
    pixel ``uv_ref [M, 2]``, with the image centre ``(cx, cy)``."""

    frame: np.ndarray
    ref: np.ndarray
    uv_ref: np.ndarray
    cx: float
    cy: float


@dataclass
class ReprojectionDerivatives:
    """Each observation's derivatives of its pixel ``(u, v)``: ``[M, 2]`` for scalars, ``[M, 2, 3]`` for vectors."""

    focal: np.ndarray
    rotation_t: np.ndarray  # the observing frame's rotation vector
    translation_t: np.ndarray
    rotation_r: np.ndarray  # the reference frame's
    translation_r: np.ndarray
    inverse_depth: np.ndarray


def rotations(r: np.ndarray, with_jacobians: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
    """Rotation matrices ``[T, 3, 3]`` of axis-angle vectors ``[T, 3]`` (Rodrigues, Taylor series near 0) and,
    if asked, their left Jacobians ``[T, 3, 3]``: column j is the axis of dR/dr_j R^T (a skew matrix), so a
    small change of r turns a rotated vector y by (J dr) x y. Taken by autograd through the formula itself,
    so that both agree at small angles too; reverse mode, because forward mode's dual level is global to the
    process and the camera solve runs its adjustments on threads."""
    r_t = torch.from_numpy(np.ascontiguousarray(r)).requires_grad_(with_jacobians)
    R = rodrigues_torch(r_t)
    if not with_jacobians:
        return R.detach().numpy(), None
    dR = torch.stack([torch.autograd.grad(R[:, a, b].sum(), r_t, retain_graph=True)[0]
                      for a in range(3) for b in range(3)], 1).view(-1, 3, 3, 3).numpy()
    turn = np.einsum("tabj,tcb->tacj", dR, R.detach().numpy())  # dR/dr_j R^T
    return R.detach().numpy(), np.stack([turn[:, 2, 1], turn[:, 0, 2], turn[:, 1, 0]], 1)


def _rays(f: float, obs: Observations) -> np.ndarray:
    return np.stack([(obs.uv_ref[:, 0] - obs.cx) / f, (obs.uv_ref[:, 1] - obs.cy) / f, np.ones(len(obs.uv_ref))], -1)


def _points(f, R, t, rho, obs: Observations):
    """Each observation's point in its frame, X = R_t R_r^T (ray - rho t_r) + rho t_t (finite at rho = 0), and
    the terms the derivatives reuse: q = ray - rho t_r and R_r^T q."""
    q = _rays(f, obs) - rho[:, None] * t[obs.ref]
    w = np.einsum("mba,mb->ma", R[obs.ref], q)
    X = np.einsum("mab,mb->ma", R[obs.frame], w) + rho[:, None] * t[obs.frame]
    return X, q, w


def reproject(f: float, r: np.ndarray, t: np.ndarray, rho: np.ndarray, obs: Observations) -> np.ndarray:
    """Pixels ``[M, 2]`` of the observations, given every frame's rotation vector ``r [T, 3]`` and translation
    ``t [T, 3]``, the focal ``f`` and each observation's inverse depth ``rho [M]``."""
    X, _, _ = _points(f, rotations(r)[0], t, rho, obs)
    z = np.maximum(X[:, 2], MIN_DEPTH)
    return np.stack([f * X[:, 0] / z + obs.cx, f * X[:, 1] / z + obs.cy], -1)


def reprojection_derivatives(f: float, r: np.ndarray, t: np.ndarray, rho: np.ndarray,
                             obs: Observations) -> ReprojectionDerivatives:
    """The derivatives of :func:`reproject`'s pixels (arguments as there)."""
    R, J = rotations(r, with_jacobians=True)
    X, q, w = _points(f, R, t, rho, obs)
    Rrel = R[obs.frame] @ R[obs.ref].transpose(0, 2, 1)
    seen = X[:, 2] >= MIN_DEPTH  # the clamp passes no gradient where it holds the depth
    z = np.maximum(X[:, 2], MIN_DEPTH)
    dp_dX = np.zeros((len(X), 2, 3))
    dp_dX[:, 0, 0] = dp_dX[:, 1, 1] = f / z
    dp_dX[:, :, 2] = np.where(seen[:, None], -f * X[:, :2] / z[:, None] ** 2, 0.0)
    dray_df = np.stack([-(obs.uv_ref[:, 0] - obs.cx) / f**2, -(obs.uv_ref[:, 1] - obs.cy) / f**2,
                        np.zeros(len(X))], -1)
    y = X - rho[:, None] * t[obs.frame]  # R_t R_r^T q, the part a turn of frame t moves
    return ReprojectionDerivatives(
        focal=X[:, :2] / z[:, None] + np.einsum("mka,ma->mk", dp_dX, np.einsum("mab,mb->ma", Rrel, dray_df)),
        rotation_t=-(dp_dX @ skew(y)) @ J[obs.frame],
        translation_t=dp_dX * rho[:, None, None],
        rotation_r=(dp_dX @ Rrel) @ skew(q) @ J[obs.ref],  # d(R_r^T q) = R_r^T (q x J dr_r)
        translation_r=-rho[:, None, None] * (dp_dX @ Rrel),
        inverse_depth=np.einsum("mka,ma->mk", dp_dX, t[obs.frame] - np.einsum("mab,mb->ma", Rrel, t[obs.ref])),
    )
