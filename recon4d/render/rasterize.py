"""``rasterize``: the one rendering function of recon4d (RGB, latent features and depth in one call).

Backends, chosen by the tensors' device unless ``backend`` says otherwise:

* ``gsplat`` – CUDA tensors; wraps ``gsplat.rasterization`` (render mode RGB+ED).
* ``cpu``    – our tile-based C++/OpenMP kernel (``cuda_ext.rasterize``), compiled on first use.
* ``torch``  – the pure-PyTorch twin of that kernel, on any device; slow, used for tests and as last
  resort (on a GPU whose gsplat kernels cannot be built: ``--config.backend torch``).

All three share gsplat's semantics (see ../shared/DESIGN.md), so a scene fitted on a
GPU renders the same on a laptop.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

import torch
from torch import Tensor

from recon4d.render.projection import (
    ProjectionSettings,
    covariance_3d,
    project_gaussians,
    project_with_kernel_backward,
)
from recon4d.render.validate import check_rasterize_inputs

Backend = Literal["auto", "gsplat", "cpu", "torch"]


class RenderOutput(NamedTuple):
    features: Tensor  # [C, H, W, D] composited features (+ background)
    depth: Tensor  # [C, H, W, 1] expected depth (accumulated z / alpha; 0 where empty)
    alpha: Tensor  # [C, H, W, 1] accumulated opacity
    meta: dict[str, Any]  # projection results (means2d, radii, depths, conics) and the backend used


def resolve_backend(backend: Backend, device: torch.device) -> str:
    if backend == "auto":
        if device.type == "cuda":
            return "gsplat"
        from cuda_ext.rasterize import kernel_available

        return "cpu" if kernel_available() else "torch"
    if backend == "gsplat" and device.type != "cuda":
        raise ValueError("backend='gsplat' needs CUDA tensors; use backend='cpu' for CPU tensors")
    if backend == "cpu" and device.type != "cpu":
        raise ValueError(f"backend='cpu' needs CPU tensors; got tensors on {device} (backend='torch' runs anywhere)")
    if backend not in ("gsplat", "cpu", "torch"):
        raise ValueError(f"backend must be one of auto, gsplat, cpu, torch; got {backend!r}")
    return backend


def rasterize(
    means: Tensor,
    quats: Tensor,
    scales: Tensor,
    opacities: Tensor,
    features: Tensor,
    viewmats: Tensor,
    Ks: Tensor,
    width: int,
    height: int,
    *,
    near_plane: float = 0.01,
    far_plane: float = 1e10,
    eps2d: float = 0.3,
    antialiased: bool = False,
    backgrounds: Tensor | None = None,
    tile_size: int = 16,
    backend: Backend = "auto",
) -> RenderOutput:
    """Render N Gaussians into C cameras.

    Args:
        means [N,3], quats [N,4] (w,x,y,z; normalised here), scales [N,3] (activated),
        opacities [N] in [0,1], features [N,D] or [C,N,D] with any D,
        viewmats [C,4,4] world-to-camera (OpenCV), Ks [C,3,3] in pixels.
        antialiased: gsplat's antialiased mode (opacity compensation for the eps2d blur).
        backgrounds: [D] or [C,D], composited behind the features (not the depth).

    Returns:
        ``RenderOutput(features, depth, alpha, meta)``; differentiable in every tensor input.
    """
    inputs = dict(means=means, quats=quats, scales=scales, opacities=opacities, features=features,
                  viewmats=viewmats, Ks=Ks, backgrounds=backgrounds)
    features = check_rasterize_inputs(inputs, width, height)
    C, D = viewmats.shape[0], features.shape[-1]
    chosen = resolve_backend(backend, means.device)
    settings = ProjectionSettings(eps2d=eps2d, near_plane=near_plane, far_plane=far_plane, antialiased=antialiased)
    if chosen == "gsplat":
        return _rasterize_gsplat(
            means, quats, scales, opacities, features, viewmats, Ks, width, height, settings, backgrounds, tile_size
        )
    if chosen == "cpu":
        proj = project_with_kernel_backward(means, quats, scales, viewmats, Ks, width, height, settings)
    else:
        proj = project_gaussians(means, covariance_3d(quats, scales), viewmats, Ks, width, height, settings)
    opac = opacities[None].expand(C, -1)
    if proj.compensations is not None:
        opac = opac * proj.compensations
    colors = features if features.dim() == 3 else features[None].expand(C, -1, -1)
    colors = torch.cat([colors, proj.depths[..., None]], dim=-1)  # depth rides along as channel D

    from cuda_ext.rasterize import rasterize_to_pixels

    render, alpha = rasterize_to_pixels(
        proj.means2d, proj.conics, colors, opac, proj.radii, proj.depths,
        width, height, tile_size, backend=chosen,
    )
    feats, depth = render[..., :D], render[..., D:] / alpha.clamp(min=1e-10)
    if backgrounds is not None:
        feats = feats + (1.0 - alpha) * backgrounds.expand(C, D)[:, None, None, :]
    meta = {
        "backend": chosen,
        "means2d": proj.means2d,
        "conics": proj.conics,
        "depths": proj.depths,
        "radii": proj.radii,
        "width": width,
        "height": height,
    }
    return RenderOutput(feats, depth, alpha, meta)


def _rasterize_gsplat(
    means, quats, scales, opacities, features, viewmats, Ks, width, height,
    settings: ProjectionSettings, backgrounds, tile_size,
) -> RenderOutput:
    import gsplat

    from recon4d.device import gsplat_kernels

    gsplat_kernels()  # built in our keyed folder under its lock, or one clear GpuSetupError
    D = features.shape[-1]
    # gsplat pads the depth channel's background with zeros itself (expected depth stays z/alpha).
    bg = None if backgrounds is None else backgrounds.expand(viewmats.shape[0], D)
    render, alpha, info = gsplat.rasterization(
        means, quats, scales, opacities, features, viewmats, Ks, width, height,
        near_plane=settings.near_plane, far_plane=settings.far_plane, eps2d=settings.eps2d, packed=False,
        tile_size=tile_size,
        backgrounds=bg, render_mode="RGB+ED",
        # all channels (+ depth) in one pass: by default gsplat renders more than 32 in chunks, each a
        # full rasterization (the features stage's 4 + 32 latent + depth would take two)
        channel_chunk=max(32, D + 1),
        rasterize_mode="antialiased" if settings.antialiased else "classic",
    )
    meta = {"backend": "gsplat", **info}
    return RenderOutput(render[..., :D], render[..., D:], alpha, meta)
