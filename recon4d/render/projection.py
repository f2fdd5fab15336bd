"""EWA projection of 3D Gaussians to 2D screen-space Gaussians, in plain PyTorch.

Semantics follow gsplat's pinhole projection exactly (so our CPU backend and the
gsplat CUDA backend render the same image): world->camera, Jacobian of the
perspective map with the camera-space point clamped to 1.3x the field of view,
``eps2d`` added to the 2D covariance (with the optional antialiasing
compensation), per-axis radii of 3.33 sigma, and Gaussians behind the near plane,
beyond the far plane or fully off-screen culled with radius 0.

This part is O(C*N) and differentiable by autograd; the O(pixels) work lives in
the rasterization kernel. ``project_with_kernel_backward`` is the same forward with
the CPU kernel's fused backward (the ``cpu`` backend's choice).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from recon4d.geometry import quat_to_rotmat


@dataclass
class Projection:
    """Screen-space Gaussians for C cameras and N Gaussians."""

    means2d: Tensor  # [C, N, 2] pixels
    conics: Tensor  # [C, N, 3] upper triangle of the inverse 2D covariance (a, b, c)
    depths: Tensor  # [C, N] camera-space z
    radii: Tensor  # [C, N, 2] int32, 0 = culled
    compensations: Tensor | None  # [C, N] antialiasing opacity factor, or None



def covariance_3d(quats: Tensor, scales: Tensor) -> Tensor:
    """World-space covariance R S S^T R^T, [N, 3, 3]."""
    m = quat_to_rotmat(quats) * scales[..., None, :]
    return m @ m.transpose(-1, -2)


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
    rot, trans = viewmats[:, :3, :3], viewmats[:, :3, 3]
    means_c = torch.einsum("cij,nj->cni", rot, means) + trans[:, None, :]
    covars_c = torch.einsum("cij,njk,clk->cnil", rot, covars, rot)

    fx, fy = Ks[:, 0, 0, None], Ks[:, 1, 1, None]
    cx, cy = Ks[:, 0, 2, None], Ks[:, 1, 2, None]
    x, y, z = means_c.unbind(-1)
    # Clamp the point used for the Jacobian to 1.3x the frustum, as gsplat does, so
    # Gaussians far outside the image do not get huge, unstable footprints.
    tan_x, tan_y = 0.5 * width / fx, 0.5 * height / fy
    lim_xp, lim_xn = (width - cx) / fx + 0.3 * tan_x, cx / fx + 0.3 * tan_x
    lim_yp, lim_yn = (height - cy) / fy + 0.3 * tan_y, cy / fy + 0.3 * tan_y
    tx = z * torch.clamp(x / z, min=-lim_xn, max=lim_xp)
    ty = z * torch.clamp(y / z, min=-lim_yn, max=lim_yp)
    zero = torch.zeros_like(z)
    jac = torch.stack(
        [fx / z, zero, -fx * tx / (z * z), zero, fy / z, -fy * ty / (z * z)], dim=-1
    ).reshape(z.shape + (2, 3))
    cov2d = jac @ covars_c @ jac.transpose(-1, -2)
    means2d = torch.stack([fx * x / z + cx, fy * y / z + cy], dim=-1)

    det_orig = cov2d[..., 0, 0] * cov2d[..., 1, 1] - cov2d[..., 0, 1] * cov2d[..., 1, 0]
    cov2d = cov2d + eps2d * torch.eye(2, dtype=cov2d.dtype, device=cov2d.device)
    det = cov2d[..., 0, 0] * cov2d[..., 1, 1] - cov2d[..., 0, 1] * cov2d[..., 1, 0]
    det = det.clamp(min=1e-10)
    compensations = torch.sqrt(torch.clamp(det_orig / det, min=0.0)) if settings.antialiased else None
    conics = torch.stack(
        [cov2d[..., 1, 1] / det, -(cov2d[..., 0, 1] + cov2d[..., 1, 0]) / 2.0 / det, cov2d[..., 0, 0] / det],
        dim=-1,
    )

    with torch.no_grad():
        radii = torch.stack(
            [torch.ceil(3.33 * torch.sqrt(cov2d[..., 0, 0])), torch.ceil(3.33 * torch.sqrt(cov2d[..., 1, 1]))],
            dim=-1,
        )
        valid = (det > 0) & (z > near_plane) & (z < far_plane)
        onscreen = (
            (means2d[..., 0] + radii[..., 0] > 0)
            & (means2d[..., 0] - radii[..., 0] < width)
            & (means2d[..., 1] + radii[..., 1] > 0)
            & (means2d[..., 1] - radii[..., 1] < height)
        )
        radii = torch.where((valid & onscreen)[..., None], radii, torch.zeros_like(radii))
        radii = torch.nan_to_num(radii, nan=0.0).int()
    return Projection(means2d, conics, z, radii, compensations)


class _KernelBackward(torch.autograd.Function):
    """``project_gaussians(means, covariance_3d(quats, scales), ...)`` differentiated by the CPU
    kernel's fused backward, which does per Gaussian what autograd does in ~100 passes through
    [C, N] tensors. The forward stays this module's, so the values are the twin's bit for bit
    (a last-bit difference in a conic can flip a pixel across the 1/255 alpha threshold)."""

    @staticmethod
    def forward(ctx, means, quats, scales, viewmats, Ks, width, height, settings):
        proj = project_gaussians(means, covariance_3d(quats, scales), viewmats, Ks, width, height, settings)
        ctx.save_for_backward(*(t.contiguous() for t in (means, quats, scales, viewmats, Ks)))
        ctx.settings = (width, height, float(settings.eps2d), bool(settings.antialiased))
        ctx.mark_non_differentiable(proj.radii)
        extra = (proj.compensations,) if settings.antialiased else ()
        return proj.means2d, proj.conics, proj.depths, proj.radii, *extra

    @staticmethod
    def backward(ctx, v_means2d, v_conics, v_depths, _v_radii, *v_compensations):
        import cuda_ext

        means, quats, scales, viewmats, Ks = ctx.saved_tensors
        v_comp = v_compensations[0] if v_compensations else v_depths.new_zeros(v_depths.shape)
        grads = [g.contiguous() for g in (v_means2d, v_conics, v_depths, v_comp)]
        ext = cuda_ext.require("rasterize_cpu")
        v_inputs = ext.project_backward(means, quats, scales, viewmats, Ks, *ctx.settings, *grads)
        return (*v_inputs, None, None, None)


def project_with_kernel_backward(
    means: Tensor, quats: Tensor, scales: Tensor, viewmats: Tensor, Ks: Tensor, width: int, height: int,
    settings: ProjectionSettings = ProjectionSettings(),
) -> Projection:
    """``project_gaussians`` of ``covariance_3d(quats, scales)`` with the CPU kernel's backward."""
    means2d, conics, depths, radii, *comp = _KernelBackward.apply(
        means, quats, scales, viewmats, Ks, width, height, settings
    )
    return Projection(means2d, conics, depths, radii, comp[0] if comp else None)
