"""How far a render sits from its frame, and the camera motion that moves it onto the frame.

Why: after the fit's per-frame gradient steps on the poses, the background of a DAVIS render still
sits 0.2-0.7 px from its frame, a different way in each frame (docs/decisions.md). Two direct
least-squares measurements of that remainder, both from the render alone:

- :func:`image_shift`: the shift ``d`` with ``render(x + d)`` closest to the frame (Gauss-Newton with
  bilinear resampling), what the bench reports (:mod:`recon4d.bench.diagnose`);
- :func:`camera_twist`: the small camera motion (rotation and translation, in camera coordinates) whose
  image motion, from the rendered depth, best explains the difference (one Gauss-Newton step of
  direct photometric alignment, as in direct visual odometry), what the fit's ``cameras`` stage applies
  (:func:`recon4d.fit.cameras.align_camera`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

SHIFT_ITERATIONS = 5  # Gauss-Newton steps: sub-pixel shifts converge in two or three


def image_gradient(image: Tensor) -> tuple[Tensor, Tensor]:
    """Central differences along x and y of ``[H, W, C]`` maps (zero on the border)."""
    gx, gy = torch.zeros_like(image), torch.zeros_like(image)
    gx[:, 1:-1] = (image[:, 2:] - image[:, :-2]) / 2
    gy[1:-1] = (image[2:] - image[:-2]) / 2
    return gx, gy


def image_shift(render: Tensor, image: Tensor, region: Tensor, iterations: int = SHIFT_ITERATIONS) -> Tensor:
    """The shift ``d = (dx, dy)`` in pixels (float64) with ``render(x + d)`` closest to ``image(x)`` over the
    boolean ``region`` [H, W]; ``render`` and ``image`` are ``[H, W, C]``. Zero where the region has no texture
    to tell a shift by."""
    H, W, _ = render.shape
    ys, xs = torch.meshgrid(torch.arange(H, dtype=torch.float64, device=render.device),
                            torch.arange(W, dtype=torch.float64, device=render.device), indexing="ij")
    source, target = render.detach().double(), image.double()
    keep = region[..., None].double()
    d = torch.zeros(2, dtype=torch.float64, device=render.device)
    for _ in range(iterations):
        grid = torch.stack([(xs + d[0]) / (W - 1) * 2 - 1, (ys + d[1]) / (H - 1) * 2 - 1], -1)[None]
        warped = F.grid_sample(source.permute(2, 0, 1)[None], grid, align_corners=True,
                               padding_mode="border")[0].permute(1, 2, 0)
        gx, gy = image_gradient(warped)
        J = torch.stack([(gx * keep).flatten(), (gy * keep).flatten()], 1)
        normal = J.T @ J
        if not torch.linalg.det(normal) > 0:  # a textureless region: no shift is observable
            return torch.zeros_like(d)
        d = d - torch.linalg.solve(normal, J.T @ ((warped - target) * keep).flatten())
    return d


def camera_twist(render: Tensor, depth: Tensor, image: Tensor, region: Tensor, K: Tensor,
                 damping: float = 1e-3) -> Tensor:
    """The camera-frame motion ``(omega, v)`` [6] (float64) that moves ``render`` [H, W, C], whose expected
    depth is ``depth`` [H, W], onto ``image`` over ``region`` [H, W]: linearised, a world point at camera
    coordinates X goes to ``X + omega x X + v`` and its pixel by the standard image Jacobian of that motion.

    ``damping`` (Levenberg-Marquardt, relative to the normal matrix's diagonal) keeps the step finite where
    the motion is not observable, e.g. a sideways translation against a pan on a background at one depth.
    Zero where nothing in the region has texture and depth."""
    H, W, _ = render.shape
    z = depth.double()
    keep = region & (z > 0)
    if not keep.any():
        return torch.zeros(6, dtype=torch.float64, device=render.device)
    fx, fy, cx, cy = (float(K[0, 0]), float(K[1, 1]), float(K[0, 2]), float(K[1, 2]))
    v_pix, u_pix = torch.meshgrid(torch.arange(H, dtype=torch.float64, device=render.device) + 0.5,
                                  torch.arange(W, dtype=torch.float64, device=render.device) + 0.5, indexing="ij")
    x, y = ((u_pix - cx) / fx)[keep], ((v_pix - cy) / fy)[keep]
    inv_z = 1.0 / z[keep]
    zero = torch.zeros_like(x)
    # d(pixel)/d(omega_x, omega_y, omega_z, v_x, v_y, v_z), rows u then v, for every kept pixel
    du = fx * torch.stack([-x * y, 1 + x * x, -y, inv_z, zero, -x * inv_z], -1)
    dv = fy * torch.stack([-(1 + y * y), x * y, x, zero, inv_z, -y * inv_z], -1)
    gx, gy = image_gradient(render.detach().double())
    gx, gy = gx[keep], gy[keep]  # [n, C]
    A = (gx[..., None] * du[:, None, :] + gy[..., None] * dv[:, None, :]).reshape(-1, 6)
    # the render after the motion: render'(x + J xi) = render(x), so render' - image = residual - A xi
    residual = (render.detach().double() - image.double())[keep].reshape(-1)
    normal = A.T @ A
    diagonal = torch.diagonal(normal)
    if not (diagonal > 0).all():
        return torch.zeros(6, dtype=torch.float64, device=render.device)
    return torch.linalg.solve(normal + damping * torch.diag(diagonal), A.T @ residual)
