"""The fit's loss terms against the libraries they stand in for."""

from __future__ import annotations

import kornia
import pytest
import torch

from cuda_ext.reference.ssim import ssim_map as ssim
from recon4d.fit.losses import l1_ssim


@pytest.mark.parametrize("shape, window", [((1, 3, 54, 96), 11), ((2, 32, 20, 30), 5), ((1, 1, 7, 9), 3)])
def test_ssim_equals_kornia(shape, window):
    torch.manual_seed(0)
    a = torch.rand(shape)
    b = (a + 0.2 * torch.randn(shape)).clamp(0, 1)
    assert torch.allclose(ssim(a, b, window), kornia.metrics.ssim(a, b, window), atol=1e-5)


def test_ssim_gradient_equals_kornia():
    torch.manual_seed(1)
    target = torch.rand(1, 3, 40, 60)
    ours = torch.rand(1, 3, 40, 60, requires_grad=True)
    theirs = ours.detach().clone().requires_grad_(True)
    ssim(ours, target, 11).mean().backward()
    kornia.metrics.ssim(theirs, target, 11).mean().backward()
    assert torch.allclose(ours.grad, theirs.grad, atol=1e-7, rtol=1e-3)


def test_l1_ssim_is_zero_for_equal_maps_only():
    img = torch.rand(30, 40, 3)
    assert l1_ssim(img, img).item() == pytest.approx(0.0, abs=1e-6)
    assert l1_ssim(img, img.flip(0)).item() > 0.1


def test_l1_ssim_with_a_pooled_ssim_term():
    """``ssim_downsample``: the SSIM part is the SSIM of the 2x2-averaged maps, the L1 part stays full-resolution."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    a, b = torch.rand(64, 96, 3, generator=g), torch.rand(64, 96, 3, generator=g)
    pa, pb = (F.avg_pool2d(x.permute(2, 0, 1)[None], 2) for x in (a, b))
    want = (a - b).abs().mean() + 0.1 * (1 - ssim(pa, pb, 5).mean())
    torch.testing.assert_close(l1_ssim(a, b, ssim_downsample=2), want)
    assert l1_ssim(a, a, ssim_downsample=2).abs() < 1e-6
