"""Mean SSIM of two ``[H, W, C]`` maps, differentiable in the first: the ``ssim_cpu`` kernel as an autograd
Function, or its PyTorch twin (``cuda_ext.reference.ssim``).

Why a kernel: SSIM was about a sixth of a DAVIS training step on 2 CPU cores, most of it the twin's
autograd nodes (pooling, padding, a grouped convolution and the elementwise map, each saved for the
backward); the kernel filters separably and writes the backward out. Backends: ``"cpu"`` (the kernel, CPU
tensors), ``"torch"`` (the twin), ``"auto"`` (the kernel for CPU tensors when it builds and the target
needs no gradient, otherwise the twin: on a GPU the twin's convolution is fast).
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

import cuda_ext
from cuda_ext.reference import ssim as reference

Backend = Literal["auto", "cpu", "torch"]


class _SSIMCPU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, pred, target, gauss, downsample):
        ext = cuda_ext.require("ssim_cpu")
        mean, pooled, moments = ext.ssim_forward(pred, target, gauss, downsample, reference.C1, reference.C2)
        ctx.save_for_backward(pooled, moments, gauss)
        ctx.size = (pred.shape[0], pred.shape[1], downsample)
        return mean

    @staticmethod
    def backward(ctx, grad):
        ext = cuda_ext.require("ssim_cpu")
        pooled, moments, gauss = ctx.saved_tensors
        height, width, downsample = ctx.size
        g_pred = ext.ssim_backward(grad, pooled, moments, gauss, height, width, downsample, reference.C1, reference.C2)
        return g_pred, None, None, None


def ssim_mean(pred: Tensor, target: Tensor, window: int, downsample: int = 1, backend: Backend = "auto") -> Tensor:
    """Mean SSIM of ``[H, W, C]`` maps in [0, 1] (of their ``downsample``-pixel averages when it is > 1), with a
    Gaussian window of ``window`` taps (odd, at most twice the pooled map's smaller side)."""
    if backend not in ("auto", "cpu", "torch"):
        raise ValueError(f"backend must be 'auto', 'cpu' or 'torch', got {backend!r}")
    if pred.dim() != 3 or pred.shape != target.shape:
        raise ValueError(f"pred and target must be [H, W, C] of one shape, got {list(pred.shape)} and {list(target.shape)}")
    if backend == "auto":
        on_cpu = pred.device.type == "cpu" and not target.requires_grad
        backend = "cpu" if on_cpu and cuda_ext.load("ssim_cpu") is not None else "torch"
    if backend == "torch":
        return reference.ssim_mean(pred, target, window, downsample)
    if target.requires_grad:
        raise ValueError("the ssim_cpu kernel differentiates pred only; target must not require grad")
    return _SSIMCPU.apply(pred, target.detach(), reference.gaussian_window(window, pred), downsample)
