"""Rotations, quaternions, rigid fits and lifting pixels with depth to 3D, in one place.

Quaternions are (w, x, y, z) throughout. Image coordinates follow the rasterizer:
pixel i spans [i, i+1), its centre is i + 0.5.

The Hamilton product and quaternion rotation are the PyTorch kernel twin's own
(``cuda_ext.reference.skin``): the twin must state exactly what the skinning kernel
computes and ``cuda_ext`` must not import ``recon4d``, so the twin owns them and this
module is the one place in ``recon4d`` that takes them from it.

Axis-angle rotations (``rodrigues``, ``rodrigues_torch``, ``log_rotation``) are the camera
solve's and the pose refinement's parameters.

The NumPy functions (``*_np``, ``rotation_vector``, ``umeyama``) serve code that works in NumPy
(the synthetic ground truth, grounding, the viewer). They are not the torch ones on
arrays: their float operations differ (``np.linalg.solve`` for ``K^-1``, a diagonal
sign matrix in Kabsch, Shepperd's branch on the trace), and the files and answers
made with them depend on those exact values.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from cuda_ext.reference.skin import quat_mul, quat_rotate

__all__ = [
    "kabsch", "kabsch_np", "lift", "lift_np", "quat_mul", "quat_rotate", "quat_to_rotmat", "quat_to_rotmat_np",
    "rotation_entries", "rotation_vector", "rotmat_to_quat", "rotmat_to_quat_np", "sample_depth", "umeyama",
]


def rotation_entries(w: Tensor, x: Tensor, y: Tensor, z: Tensor) -> list[list[Tensor]]:
    """The rotation matrix of unit quaternions given as component tensors, as rows of entries."""
    return [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]


def quat_to_rotmat(quats: Tensor) -> Tensor:
    """Rotation matrices [..., 3, 3] from (w, x, y, z) quaternions (normalised here). The components are made
    contiguous first: the products on strided views cost twice as much, for the same values."""
    w, x, y, z = torch.movedim(torch.nn.functional.normalize(quats, dim=-1), -1, 0).contiguous()
    entries = [e for row in rotation_entries(w, x, y, z) for e in row]
    return torch.stack(entries, dim=-1).reshape(quats.shape[:-1] + (3, 3))


def rotmat_to_quat(rot: Tensor) -> Tensor:
    """(w, x, y, z) of rotation matrices ``[..., 3, 3]`` (stable branch on the largest component, per matrix)."""
    m = rot
    m00, m11, m22 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    cands = torch.stack([1 + m00 + m11 + m22, 1 + m00 - m11 - m22, 1 - m00 + m11 - m22, 1 - m00 - m11 + m22], -1)
    s = torch.sqrt(cands.max(-1).values.clamp(min=1e-12)) * 2
    d21, d02, d10 = m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]
    s01, s02, s12 = m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1]
    branches = torch.stack([
        torch.stack([s / 4, d21 / s, d02 / s, d10 / s], -1),
        torch.stack([d21 / s, s / 4, s01 / s, s02 / s], -1),
        torch.stack([d02 / s, s01 / s, s / 4, s12 / s], -1),
        torch.stack([d10 / s, s02 / s, s12 / s, s / 4], -1),
    ], -2)  # [..., 4 branches, 4]
    pick = cands.argmax(-1)[..., None, None].expand(*cands.shape[:-1], 1, 4)
    return F.normalize(branches.gather(-2, pick)[..., 0, :], dim=-1)


def kabsch(src: Tensor, dst: Tensor, w: Tensor) -> tuple[Tensor, Tensor]:
    """Rotation R and translation t minimising sum w |R src + t - dst|^2, batched over leading dimensions
    (src, dst ``[..., n, 3]``, w ``[..., n]``; zero weights leave a point out)."""
    w = w / w.sum(-1, keepdim=True)
    mu_s, mu_d = (w[..., None] * src).sum(-2), (w[..., None] * dst).sum(-2)
    cov = ((dst - mu_d[..., None, :]) * w[..., None]).transpose(-1, -2) @ (src - mu_s[..., None, :])
    u, _, vt = torch.linalg.svd(cov)
    fix = torch.ones_like(mu_s)
    fix[..., 2] = torch.sign(torch.det(u @ vt))
    rot = u @ (fix[..., None] * vt)
    return rot, mu_d - (rot @ mu_s[..., None])[..., 0]


def lift(uv: Tensor, depth: Tensor, K: Tensor, viewmat: Tensor) -> Tensor:
    """Image coordinates with camera depth -> world points [P,3]."""
    ones = torch.ones_like(uv[:, :1])
    rays = torch.cat([uv, ones], 1) @ torch.linalg.inv(K).T
    cam = rays * depth[:, None]
    c2w = torch.linalg.inv(viewmat)
    return cam @ c2w[:3, :3].T + c2w[:3, 3]


def sample_depth(depth: Tensor, xy: Tensor) -> Tensor:
    """Depth of the pixel containing each image point (nearest pixel, no blending across edges)."""
    x = xy[:, 0].floor().long().clamp(0, depth.shape[1] - 1)
    y = xy[:, 1].floor().long().clamp(0, depth.shape[0] - 1)
    return depth[y, x]


def quat_to_rotmat_np(q: np.ndarray) -> np.ndarray:
    """Rotation matrix [3, 3] of one (w, x, y, z) quaternion (normalised here)."""
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


def rotmat_to_quat_np(m: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z) of one 3x3 rotation (Shepperd's method, numerically safe branch)."""
    tr = np.trace(m)
    if tr > 0:
        s = 2.0 * math.sqrt(tr + 1.0)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * math.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = [0.0] * 4
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    return np.array(q)


def rotation_vector(rot: np.ndarray) -> np.ndarray:
    """Axis times angle (radians) of a rotation matrix."""
    angle = math.acos(float(np.clip((np.trace(rot) - 1) / 2, -1.0, 1.0)))
    axis = np.array([rot[2, 1] - rot[1, 2], rot[0, 2] - rot[2, 0], rot[1, 0] - rot[0, 1]])
    norm = np.linalg.norm(axis)
    if norm < 1e-9:
        if angle < 1e-6:
            return np.zeros(3)
        # 180 degrees: the axis is the eigenvector of eigenvalue 1
        w, v = np.linalg.eigh((rot + rot.T) / 2)
        return v[:, np.argmax(w)] * angle
    return axis / norm * angle


def kabsch_np(src: np.ndarray, dst: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted rigid fit: R, t minimising sum w |R src + t - dst|^2 (src, dst ``[n, 3]``, w ``[n]``)."""
    w = w / w.sum()
    mu_s, mu_d = w @ src, w @ dst
    u, _, vt = np.linalg.svd(((dst - mu_d) * w[:, None]).T @ (src - mu_s))
    fix = np.diag([1.0, 1.0, float(np.sign(np.linalg.det(u @ vt)))])
    rot = u @ fix @ vt
    return rot, mu_d - rot @ mu_s


def umeyama(src: np.ndarray, dst: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Similarity (s, R, t) minimising |s R src + t - dst|^2 (Umeyama 1991)."""
    ms, md = src.mean(0), dst.mean(0)
    a, b = src - ms, dst - md
    U, S, Vt = np.linalg.svd(b.T @ a / len(src))
    D = np.eye(3)
    D[2, 2] = np.sign(np.linalg.det(U @ Vt)) or 1.0
    R = U @ D @ Vt
    var = (a ** 2).sum() / len(src)
    s = float(np.trace(np.diag(S) @ D) / var) if var > 1e-12 else 1.0
    return s, R, md - s * R @ ms


def lift_np(uv: np.ndarray, depth: np.ndarray, K: np.ndarray, viewmat: np.ndarray) -> np.ndarray:
    """Image points with camera depth -> world points."""
    rays = np.linalg.solve(K, np.concatenate([uv, np.ones((len(uv), 1))], 1).T).T
    cam = rays * depth[:, None]
    c2w = np.linalg.inv(viewmat)
    return cam @ c2w[:3, :3].T + c2w[:3, 3]


def pixels_np(cam_points: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Camera-frame points ``[..., 3]`` -> pixel coordinates ``[..., 2]`` (pixel centres at +0.5), the
    inverse of :func:`lift_np`. A point at or behind the camera plane is divided by 1e-9, not its depth:
    callers test the depth themselves."""
    return cam_points[..., :2] / np.maximum(cam_points[..., 2:], 1e-9) @ K[:2, :2].T + K[:2, 2]


def pixel_cells_np(xy: np.ndarray, W: int, H: int) -> np.ndarray:
    """Integer pixel ``(x, y)`` whose cell holds each position ``[..., 2]``, clipped into a ``W`` x ``H`` image."""
    return np.clip(np.floor(xy).astype(int), 0, [W - 1, H - 1])


def rodrigues(r: np.ndarray) -> np.ndarray:
    """Rotation matrices ``[N, 3, 3]`` from axis-angle vectors ``[N, 3]``."""
    theta = np.linalg.norm(r, axis=1)[:, None, None]
    k = r / np.maximum(theta[:, :, 0], 1e-12)
    Kx = np.zeros((len(r), 3, 3))
    Kx[:, 0, 1], Kx[:, 0, 2], Kx[:, 1, 0] = -k[:, 2], k[:, 1], k[:, 2]
    Kx[:, 1, 2], Kx[:, 2, 0], Kx[:, 2, 1] = -k[:, 0], -k[:, 1], k[:, 0]
    small = theta < 1e-8
    R = np.eye(3) + np.sin(theta) * Kx + (1 - np.cos(theta)) * Kx @ Kx
    return np.where(small, np.eye(3) + skew(r), R)


def skew(r: np.ndarray) -> np.ndarray:
    """``[N, 3, 3]`` matrices of the cross product with ``r [N, 3]``."""
    S = np.zeros((len(r), 3, 3))
    S[:, 0, 1], S[:, 0, 2], S[:, 1, 0] = -r[:, 2], r[:, 1], r[:, 2]
    S[:, 1, 2], S[:, 2, 0], S[:, 2, 1] = -r[:, 0], -r[:, 1], r[:, 0]
    return S


def rodrigues_torch(r: torch.Tensor) -> torch.Tensor:
    """Differentiable rotation matrices ``[N, 3, 3]`` from axis-angle ``[N, 3]`` (Taylor series near 0)."""
    th2 = (r * r).sum(-1, keepdim=True)[..., None]
    small = th2 < 1e-8
    th = torch.sqrt(torch.where(small, torch.ones_like(th2), th2))
    a = torch.where(small, 1 - th2 / 6, torch.sin(th) / th)
    b = torch.where(small, 0.5 - th2 / 24, (1 - torch.cos(th)) / torch.where(small, torch.ones_like(th2), th2))
    z = torch.zeros_like(r[:, 0])
    S = torch.stack([z, -r[:, 2], r[:, 1], r[:, 2], z, -r[:, 0], -r[:, 1], r[:, 0], z], -1).view(-1, 3, 3)
    return torch.eye(3, dtype=r.dtype, device=r.device) + a * S + b * S @ S


def log_rotation(R: np.ndarray) -> np.ndarray:
    return np.stack([cv2.Rodrigues(m)[0][:, 0] for m in R])


def points_in_cameras(viewmats: np.ndarray, points: np.ndarray) -> np.ndarray:
    """World points ``[P, 3]`` in each camera's frame, ``[T, P, 3]``, for world-to-camera ``viewmats [T, 4, 4]``."""
    return np.einsum("tij,pj->tpi", viewmats[:, :3, :3], points) + viewmats[:, None, :3, 3]


def camera_centres(viewmats: np.ndarray) -> np.ndarray:
    """World positions ``[..., 3]`` of cameras given world-to-camera matrices ``[..., 4, 4]``."""
    rot, trans = viewmats[..., :3, :3], viewmats[..., :3, 3]
    return -np.einsum("...ji,...j->...i", rot, trans)
