"""EWA projection of 3D Gaussians to 2D screen-space Gaussians, in plain PyTorch.

Semantics follow gsplat's pinhole projection exactly (so our CPU backend and the
gsplat CUDA backend render the same image): world->camera, Jacobian of the
perspective map with the camera-space point clamped to 1.3x the field of view,
``eps2d`` added to the 2D covariance (with the optional antialiasing
compensation), per-axis radii of 3.33 sigma, and Gaussians behind the near plane,
beyond the far plane or fully off-screen culled with radius 0.

This is the PyTorch twin: O(C*N), differentiable by autograd, the ``torch`` backend's
projection; the O(pixels) work lives in the rasterization kernel.
``project_with_kernel_backward`` is the same projection by the CPU kernel
(cuda_ext/csrc/cpu/project.cpp), the same values bit for bit and a fused backward
(the ``cpu`` backend's choice).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from recon4d.geometry import rotation_entries


@dataclass
class Projection:
    """Screen-space Gaussians for C cameras and N Gaussians."""

    means2d: Tensor  # [C, N, 2] pixels
    conics: Tensor  # [C, N, 3] upper triangle of the inverse 2D covariance (a, b, c)
    depths: Tensor  # [C, N] camera-space z
    radii: Tensor  # [C, N, 2] int32, 0 = culled
    compensations: Tensor | None  # [C, N] antialiasing opacity factor, or None



def _planes(t: Tensor) -> list[Tensor]:
    """The last axis's components of ``t`` as contiguous tensors (``t[..., 0]``, ``t[..., 1]``, ...)."""
    return list(torch.movedim(t, -1, 0).contiguous())


def _dot3(a: list[Tensor], b: list[Tensor]) -> Tensor:
    """``a[0] b[0] + a[1] b[1] + a[2] b[2]``, summed left to right (as the kernel does)."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def covariance_3d(quats: Tensor, scales: Tensor) -> Tensor:
    """World-space covariance R S S^T R^T, [N, 3, 3], of (w, x, y, z) quaternions (normalised here)."""
    w, x, y, z = _planes(quats)
    norm = torch.sqrt(w * w + x * x + y * y + z * z).clamp(min=1e-12)
    rot = rotation_entries(w / norm, x / norm, y / norm, z / norm)
    s = _planes(scales)
    m = [[rot[i][j] * s[j] for j in range(3)] for i in range(3)]
    cov = [_dot3(m[i], m[j]) for i in range(3) for j in range(3)]
    return torch.stack(cov, dim=-1).reshape(quats.shape[:-1] + (3, 3))


@dataclass(frozen=True)
class ProjectionSettings:
    """gsplat's projection options, at gsplat's defaults."""

    eps2d: float = 0.3
    near_plane: float = 0.01
    far_plane: float = 1e10
    antialiased: bool = False


def project_gaussians(
    means: Tensor, covars: Tensor, viewmats: Tensor, Ks: Tensor, width: int, height: int,
    settings: ProjectionSettings = ProjectionSettings(),
) -> Projection:
    """Project N world-space Gaussians ([N, 3] means, [N, 3, 3] covariances) into C pinhole cameras
    ([C, 4, 4] world-to-camera, [C, 3, 3] intrinsics; OpenCV convention)."""
    eps2d, near_plane, far_plane = settings.eps2d, settings.near_plane, settings.far_plane
    # Every product and sum is written out per component, in the order the CPU kernel (cuda_ext/csrc/cpu/
    # project.cpp) uses, on contiguous [C, N] planes: no BLAS call, whose summation order and fused
    # multiply-adds are its own, so the kernel's forward and this one agree bit for bit.
    rot = [[viewmats[:, i, j, None] for j in range(3)] for i in range(3)]  # [C, 1] each
    trans = [viewmats[:, i, 3, None] for i in range(3)]
    mean = [t[None] for t in _planes(means)]  # [1, N] each
    cov = _planes(covars.flatten(-2))
    cov = [[cov[3 * i + j][None] for j in range(3)] for i in range(3)]
    x, y, z = (_dot3(rot[i], mean) + trans[i] for i in range(3))
    rc = [[_dot3(rot[i], [cov[0][k], cov[1][k], cov[2][k]]) for k in range(3)] for i in range(3)]  # R cov
    cov_c = [[_dot3(rc[i], rot[l]) for l in range(3)] for i in range(3)]  # R cov R^T

    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    # Clamp the point used for the Jacobian to 1.3x the frustum, as gsplat does, so
    # Gaussians far outside the image do not get huge, unstable footprints.
    tan_x, tan_y = 0.5 * width / fx, 0.5 * height / fy
    lim_xp, lim_xn = (width - cx) / fx + 0.3 * tan_x, cx / fx + 0.3 * tan_x
    lim_yp, lim_yn = (height - cy) / fy + 0.3 * tan_y, cy / fy + 0.3 * tan_y
    tx = z * torch.clamp(x / z, min=-lim_xn, max=lim_xp)
    ty = z * torch.clamp(y / z, min=-lim_yn, max=lim_yp)
    # J = [[j00, 0, j02], [0, j11, j12]]; the 2D covariance J cov_c J^T without the zero terms
    j00, j02 = fx / z, -fx * tx / (z * z)
    j11, j12 = fy / z, -fy * ty / (z * z)
    js0 = [j00 * cov_c[0][k] + j02 * cov_c[2][k] for k in range(3)]
    js1 = [j11 * cov_c[1][k] + j12 * cov_c[2][k] for k in range(3)]
    a, b = js0[0] * j00 + js0[2] * j02, js0[1] * j11 + js0[2] * j12
    b_t, c = js1[0] * j00 + js1[2] * j02, js1[1] * j11 + js1[2] * j12
    u, v = fx * x / z + cx, fy * y / z + cy
    means2d = torch.stack([u, v], dim=-1)

    det_orig = a * c - b * b_t
    a, c = a + eps2d, c + eps2d  # the blur
    det = (a * c - b * b_t).clamp(min=1e-10)
    compensations = torch.sqrt(torch.clamp(det_orig / det, min=0.0)) if settings.antialiased else None
    conics = torch.stack([c / det, -(b + b_t) / 2.0 / det, a / det], dim=-1)

    with torch.no_grad():
        rx, ry = torch.ceil(3.33 * torch.sqrt(a)), torch.ceil(3.33 * torch.sqrt(c))
        valid = (det > 0) & (z > near_plane) & (z < far_plane)
        onscreen = (u + rx > 0) & (u - rx < width) & (v + ry > 0) & (v - ry < height)
        radii = torch.stack([rx, ry], dim=-1)
        radii = torch.where((valid & onscreen)[..., None], radii, torch.zeros_like(radii))
        radii = torch.nan_to_num(radii, nan=0.0).int()
    return Projection(means2d, conics, z, radii, compensations)


class _KernelProjection(torch.autograd.Function):
    """``project_gaussians(means, covariance_3d(quats, scales), ...)`` by the CPU kernel, forward and backward.
    The forward rounds as the twin does, so the values are the twin's bit for bit (a last-bit difference in a
    conic can flip a pixel across the 1/255 alpha threshold); the backward does per Gaussian what autograd
    does in ~100 passes through [C, N] tensors."""

    @staticmethod
    def forward(ctx, means, quats, scales, viewmats, Ks, width, height, settings):
        import cuda_ext

        inputs = tuple(t.contiguous() for t in (means, quats, scales, viewmats, Ks))
        ext = cuda_ext.require("project_cpu")
        means2d, conics, depths, radii, comps = ext.project_forward(
            *inputs, width, height, float(settings.eps2d), float(settings.near_plane), float(settings.far_plane),
            bool(settings.antialiased),
        )
        ctx.save_for_backward(*inputs)
        ctx.settings = (width, height, float(settings.eps2d), bool(settings.antialiased))
        ctx.mark_non_differentiable(radii)
        extra = (comps,) if settings.antialiased else ()
        return means2d, conics, depths, radii, *extra

    @staticmethod
    def backward(ctx, v_means2d, v_conics, v_depths, _v_radii, *v_compensations):
        import cuda_ext

        means, quats, scales, viewmats, Ks = ctx.saved_tensors
        v_comp = v_compensations[0] if v_compensations else v_depths.new_zeros(v_depths.shape)
        grads = [g.contiguous() for g in (v_means2d, v_conics, v_depths, v_comp)]
        ext = cuda_ext.require("project_cpu_native")
        v_inputs = ext.project_backward(means, quats, scales, viewmats, Ks, *ctx.settings, *grads)
        return (*v_inputs, None, None, None)


def project_with_kernel_backward(
    means: Tensor, quats: Tensor, scales: Tensor, viewmats: Tensor, Ks: Tensor, width: int, height: int,
    settings: ProjectionSettings = ProjectionSettings(),
) -> Projection:
    """``project_gaussians`` of ``covariance_3d(quats, scales)`` by the CPU kernel (same values, fused backward)."""
    means2d, conics, depths, radii, *comp = _KernelProjection.apply(
        means, quats, scales, viewmats, Ks, width, height, settings
    )
    return Projection(means2d, conics, depths, radii, comp[0] if comp else None)
