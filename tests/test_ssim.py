"""The SSIM kernel (``cuda_ext.ssim``) against its PyTorch twin: values, gradients, strided input, bad input."""

from __future__ import annotations

import pytest
import torch

from cuda_ext import ssim as kernel
from cuda_ext.reference import ssim as twin
from tests.conftest import requires_compiler

pytestmark = requires_compiler


def pair(height, width, channels, dtype, seed=0):
    """A map and a noisy, darkened copy of it (SSIM well away from 0 and 1), and the map as a strided view."""
    g = torch.Generator().manual_seed(seed)
    wide = torch.rand(height, width, channels + 2, generator=g, dtype=dtype)
    view = wide[..., 1:channels + 1]
    target = (0.8 * view + 0.1 * torch.rand(height, width, channels, generator=g, dtype=dtype)).clamp(0, 1)
    return view, target


def value_and_grad(fn, pred, target, *args):
    pred = pred.detach().clone().requires_grad_(True)
    value = fn(pred, target, *args)
    (3.0 * value).backward()
    return value.detach(), pred.grad


CASES = [((64, 96, 3), 11, 1), ((65, 97, 3), 5, 2), ((135, 241, 3), 11, 2), ((20, 30, 32), 5, 1), ((9, 13, 2), 3, 3)]


def run_kernel(*args):
    return kernel.ssim_mean(*args, backend="cpu")


@pytest.mark.parametrize("shape, window, downsample", CASES)
def test_kernel_matches_twin_in_float64(shape, window, downsample):
    view, target = pair(*shape, torch.float64)
    got = value_and_grad(run_kernel, view, target, window, downsample)
    want = value_and_grad(twin.ssim_mean, view, target, window, downsample)
    assert 0.2 < want[0] < 0.99
    torch.testing.assert_close(got[0], want[0], atol=1e-13, rtol=0)
    scale = want[1].abs().max()
    torch.testing.assert_close(got[1] / scale, want[1] / scale, atol=1e-12, rtol=0)
    # rows and columns past the last whole pool block get no gradient, as avg_pool2d gives them none
    h, w = (s // downsample * downsample for s in shape[:2])
    assert got[1][h:].abs().sum() == 0 and got[1][:, w:].abs().sum() == 0
    assert got[1][:h, :w].abs().min() > 0


@pytest.mark.parametrize("shape, window, downsample", CASES)
def test_kernel_in_float32_is_as_close_to_float64_as_the_twin(shape, window, downsample):
    """In float32 the two round differently (SSIM's variances cancel); each is judged against float64."""
    view, target = pair(*shape, torch.float64)
    truth = value_and_grad(twin.ssim_mean, view, target, window, downsample)
    args = (view.float(), target.float(), window, downsample)
    got, twins = value_and_grad(run_kernel, *args), value_and_grad(twin.ssim_mean, *args)
    scale = truth[1].abs().max()

    def errors(result):
        return (result[0] - truth[0]).abs().item(), ((result[1] - truth[1]).abs().max() / scale).item()

    (value_error, grad_error), (twin_value_error, twin_grad_error) = errors(got), errors(twins)
    assert value_error <= 2 * twin_value_error + 1e-7
    assert grad_error <= 2 * twin_grad_error + 1e-6


def test_strided_and_contiguous_input_give_the_same():
    view, target = pair(40, 50, 3, torch.float32)
    assert run_kernel(view, target, 11) == run_kernel(view.contiguous(), target, 11)


def test_gradcheck_float64():
    view, target = pair(12, 14, 2, torch.float64, seed=3)
    pred = view.detach().clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda p: run_kernel(p, target, 5, 2), (pred,))


def test_auto_uses_the_twin_when_the_target_needs_a_gradient():
    view, target = pair(30, 40, 3, torch.float64)
    target = target.clone().requires_grad_(True)
    kernel.ssim_mean(view, target, 5).backward()
    assert target.grad is not None and target.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="target must not require grad"):
        run_kernel(view, target, 5)


def test_bad_input_is_reported():
    view, target = pair(30, 40, 3, torch.float32)
    with pytest.raises(ValueError, match=r"\[H, W, C\] of one shape"):
        run_kernel(view, target[:-1], 5)
    with pytest.raises(RuntimeError, match="needs maps larger"):
        run_kernel(view[:8, :8], target[:8, :8], 11, 2)
