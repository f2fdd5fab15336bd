"""Rasterize screen-space Gaussians to pixels: the C++ CPU kernel as an autograd Function.

``rasterize_to_pixels`` takes projected Gaussians (see ``recon4d.render.projection``)
and composites them per camera. Backends: ``"cpu"`` (our OpenMP kernel, built on first
use), ``"torch"`` (the twin in ``cuda_ext.reference.rasterize``), ``"auto"`` (the kernel
when it builds, otherwise the twin after one warning).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

import cuda_ext
from cuda_ext.reference import rasterize as reference

Backend = Literal["auto", "cpu", "torch"]


class _RasterizeCPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, means2d, conics, colors, opacities, radii, depths, width, height, tile_size):
        ext = cuda_ext.require("rasterize_cpu")
        render, alpha, offsets, flat_ids, last_ids, splats = ext.rasterize_forward(
            means2d, conics, colors, opacities, radii, depths, width, height, tile_size
        )
        ctx.save_for_backward(means2d, conics, colors, opacities, radii, splats, offsets, flat_ids, alpha, last_ids)
        ctx.geometry = (width, height, tile_size)
        return render, alpha

    @staticmethod
    def backward(ctx, v_render, v_alpha):
        ext = cuda_ext.require("rasterize_cpu")
        means2d, conics, colors, opacities, radii, splats, offsets, flat_ids, alpha, last_ids = ctx.saved_tensors
        width, height, tile_size = ctx.geometry
        g_means2d, g_conics, g_colors, g_opac = ext.rasterize_backward(
            means2d, conics, colors, opacities, radii, splats, offsets, flat_ids, alpha, last_ids,
            v_render.contiguous(), v_alpha.contiguous(), width, height, tile_size,
        )
        return g_means2d, g_conics, g_colors, g_opac, None, None, None, None, None


def kernel_available() -> bool:
    """True when the CPU kernels (the rasterizer and the projection that feeds it) are (or can be) built here."""
    return all(cuda_ext.load(name) is not None for name in ("rasterize_cpu", "project_cpu", "project_cpu_native"))


def rasterize_to_pixels(
    means2d: Tensor,
    conics: Tensor,
    colors: Tensor,
    opacities: Tensor,
    radii: Tensor,
    depths: Tensor,
    width: int,
    height: int,
    tile_size: int = 16,
    backend: Backend = "auto",
) -> tuple[Tensor, Tensor]:
    """Composite [C, N] screen-space Gaussians into ``render`` [C,H,W,D] and ``alpha`` [C,H,W,1]."""
    if backend == "auto":
        backend = "cpu" if kernel_available() else "torch"
    if backend == "torch":
        return reference.rasterize_to_pixels(
            means2d, conics, colors, opacities, radii, depths, width, height, tile_size
        )
    if backend != "cpu":
        raise ValueError(f"backend must be 'auto', 'cpu' or 'torch', got {backend!r}")
    cuda_ext.require("rasterize_cpu")  # raises KernelBuildError with the reason if it cannot build
    args = [t.contiguous() for t in (means2d, conics, colors, opacities)]
    return _RasterizeCPU.apply(
        *args, radii.to(torch.int32).contiguous(), depths.contiguous(), width, height, tile_size
    )
