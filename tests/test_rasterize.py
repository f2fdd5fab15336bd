"""Rasterizer: CPU kernel vs PyTorch twin vs gsplat, analytic cases, gradients, bad input."""

from __future__ import annotations

import math

import pytest
import torch

from recon4d.render import ProjectionSettings, covariance_3d, project_gaussians, rasterize
from tests.conftest import requires_compiler, requires_gpu

pytestmark = requires_compiler


def random_scene(n, d, cameras=2, width=96, height=64, dtype=torch.float32, seed=0, spread=0.8):
    g = torch.Generator().manual_seed(seed)
    means = torch.randn(n, 3, generator=g, dtype=dtype) * spread + torch.tensor([0.0, 0.0, 4.0], dtype=dtype)
    quats = torch.randn(n, 4, generator=g, dtype=dtype)
    scales = torch.rand(n, 3, generator=g, dtype=dtype) * 0.08 + 0.01
    opacities = torch.rand(n, generator=g, dtype=dtype)
    features = torch.rand(n, d, generator=g, dtype=dtype)
    viewmats = torch.eye(4, dtype=dtype).repeat(cameras, 1, 1)
    for c in range(cameras):  # small rotation about y plus a sideways shift per camera
        a = 0.1 * c
        viewmats[c, 0, 0], viewmats[c, 0, 2], viewmats[c, 2, 0], viewmats[c, 2, 2] = math.cos(a), math.sin(a), -math.sin(a), math.cos(a)
        viewmats[c, 0, 3] = 0.2 * c
    f = 0.9 * width
    Ks = torch.tensor([[f, 0, width / 2], [0, f, height / 2], [0, 0, 1]], dtype=dtype).repeat(cameras, 1, 1)
    return [means, quats, scales, opacities, features, viewmats, Ks, width, height]


@pytest.mark.parametrize("n,d", [(1000, 3), (20000, 3), (5000, 35), (20000, 35)])
def test_kernel_forward_matches_twin(n, d):
    scene = random_scene(n, d, width=128, height=96, seed=n + d)
    bg = torch.linspace(0, 1, d)
    out_k = rasterize(*scene, backgrounds=bg, backend="cpu")
    out_t = rasterize(*scene, backgrounds=bg, backend="torch")
    assert out_k.alpha.max() > 0.5, "scene should cover the image"
    torch.testing.assert_close(out_k.features, out_t.features, atol=1e-5, rtol=0)
    torch.testing.assert_close(out_k.alpha, out_t.alpha, atol=1e-5, rtol=0)
    # Expected depth divides by alpha; compare where something was rendered.
    covered = out_t.alpha > 1e-2
    torch.testing.assert_close(out_k.depth[covered], out_t.depth[covered], atol=1e-4, rtol=1e-5)


def _grads(scene, backend, antialiased=False):
    inputs = [t.clone().requires_grad_(True) if torch.is_tensor(t) else t for t in scene]
    d = scene[4].shape[-1]
    bg = torch.full((d,), 0.25, dtype=scene[0].dtype, requires_grad=True)
    out = rasterize(*inputs, backgrounds=bg, antialiased=antialiased, backend=backend)
    weights = [torch.linspace(-1, 1, o.numel(), dtype=o.dtype).reshape(o.shape) for o in out[:3]]
    sum((o * w).sum() for o, w in zip(out[:3], weights)).backward()
    return [t.grad for t in inputs[:7]] + [bg.grad]


@pytest.mark.parametrize("n,d,antialiased", [(2000, 3, False), (3000, 35, True)])
def test_kernel_backward_matches_twin(n, d, antialiased):
    scene = random_scene(n, d, seed=7)
    names = ["means", "quats", "scales", "opacities", "features", "viewmats", "Ks", "backgrounds"]
    for name, gk, gt in zip(names, _grads(scene, "cpu", antialiased), _grads(scene, "torch", antialiased)):
        assert gt.abs().max() > 0, f"{name}: no gradient reached it"
        # gsplat's own tests compare its CUDA backward with autograd at atol=1e-4/rtol=1e-4 on
        # per-element values; sums over thousands of pixels need a scale-aware tolerance.
        torch.testing.assert_close(gk, gt, atol=1e-4 * gt.abs().max().item(), rtol=1e-3, msg=name)


def test_kernel_backward_is_deterministic():
    # Large Gaussians span many tiles, so each one's gradient is a sum over tiles that different
    # threads finish in a different order from run to run; the sum must not depend on that order.
    scene = random_scene(3000, 35, width=256, height=192, seed=11, spread=0.5)
    scene[2] = scene[2] * 3
    first = _grads(scene, "cpu")
    for _ in range(3):
        for name, a, b in zip(("means", "quats", "scales", "opacities", "features"), first, _grads(scene, "cpu")):
            assert torch.equal(a, b), name


@pytest.mark.parametrize("backend", ["cpu", "torch"])
def test_gradcheck_float64(backend):
    g = torch.Generator().manual_seed(3)
    n = 4
    means = torch.tensor([[0.0, 0.0, 3.0], [0.2, -0.1, 3.5], [-0.2, 0.15, 4.0], [0.1, 0.1, 2.5]], dtype=torch.float64)
    quats = torch.randn(n, 4, generator=g, dtype=torch.float64)
    scales = torch.rand(n, 3, generator=g, dtype=torch.float64) * 0.1 + 0.15
    opacities = torch.tensor([0.5, 0.6, 0.4, 0.3], dtype=torch.float64)
    features = torch.rand(n, 2, generator=g, dtype=torch.float64)
    viewmats = torch.eye(4, dtype=torch.float64)[None].clone()
    Ks = torch.tensor([[[20.0, 0, 8], [0, 20.0, 6], [0, 0, 1]]], dtype=torch.float64)

    def fn(means, quats, scales, opacities, features, viewmats):
        out = rasterize(means, quats, scales, opacities, features, viewmats, Ks, 16, 12, backend=backend)
        return out.features, out.depth, out.alpha

    inputs = [t.requires_grad_(True) for t in (means, quats, scales, opacities, features, viewmats)]
    assert torch.autograd.gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("antialiased", [False, True])
def test_kernel_projection_is_the_twins_bit_for_bit(dtype, antialiased):
    """The CPU kernel's forward rounds as the twin does: equal bit patterns (-0.0 is not 0.0 here), on scenes
    with Gaussians behind, beside and far outside the cameras and axis-aligned ones (exact zeros)."""
    from recon4d.render.projection import project_with_kernel_backward

    for seed, spread in ((1, 0.5), (2, 3.0)):
        means, quats, scales, *_rest, viewmats, Ks, width, height = random_scene(8000, 3, seed=seed, spread=spread,
                                                                                  dtype=dtype)
        quats[:200] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=dtype)
        settings = ProjectionSettings(antialiased=antialiased)
        twin = project_gaussians(means, covariance_3d(quats, scales), viewmats, Ks, width, height, settings)
        kernel = project_with_kernel_backward(means, quats, scales, viewmats, Ks, width, height, settings)
        assert (twin.radii == 0).all(-1).any() and (twin.radii > 0).all(-1).any()
        as_int = torch.int32 if dtype == torch.float32 else torch.int64
        for name in ("means2d", "conics", "depths", "radii") + (("compensations",) if antialiased else ()):
            a, b = getattr(twin, name), getattr(kernel, name)
            if a.is_floating_point():
                a, b = a.view(as_int), b.view(as_int)
            assert torch.equal(a, b), name


def test_projection_matches_gsplat_reference():
    from gsplat.cuda._torch_impl import _fully_fused_projection

    means, quats, scales, *_rest, viewmats, Ks, width, height = random_scene(3000, 3, spread=3.0)
    covars = covariance_3d(quats, scales)
    ours = project_gaussians(means, covars, viewmats, Ks, width, height, ProjectionSettings(antialiased=True))
    radii, means2d, depths, conics, comp = _fully_fused_projection(
        means, covars, viewmats, Ks, width, height, calc_compensations=True
    )
    assert (radii > 0).any() and (radii == 0).any(), "scene should have visible and culled Gaussians"
    assert torch.equal(ours.radii, radii)
    visible = radii.all(-1)
    torch.testing.assert_close(ours.means2d[visible], means2d[visible])
    torch.testing.assert_close(ours.depths, depths)
    torch.testing.assert_close(ours.conics[visible], conics[visible])
    torch.testing.assert_close(ours.compensations[visible], comp[visible])


@pytest.mark.parametrize("backend", ["cpu", "torch"])
def test_single_gaussian_matches_closed_form(backend):
    """One isotropic Gaussian seen head-on: every pixel is o*exp(-r^2/2s^2)-blended, depth = z."""
    z, s, f, o = 5.0, 0.05, 100.0, 0.8
    width = height = 32
    means = torch.tensor([[0.0, 0.0, z]])
    quats = torch.tensor([[1.0, 0, 0, 0]])
    scales = torch.full((1, 3), s)
    color = torch.tensor([[0.2, 0.4, 0.6]])
    viewmats = torch.eye(4)[None]
    Ks = torch.tensor([[[f, 0, 16.0], [0, f, 16.0], [0, 0, 1]]])
    bg = torch.tensor([1.0, 0.0, 0.0])
    out = rasterize(means, quats, scales, torch.tensor([o]), color, viewmats, Ks, width, height,
                    backgrounds=bg, eps2d=0.0, backend=backend)
    sigma_px = f * s / z  # screen-space standard deviation
    ys, xs = torch.meshgrid(torch.arange(height) + 0.5, torch.arange(width) + 0.5, indexing="ij")
    alpha = o * torch.exp(-((xs - 16) ** 2 + (ys - 16) ** 2) / (2 * sigma_px**2))
    alpha = torch.where(alpha >= 1 / 255, alpha, torch.zeros_like(alpha))
    torch.testing.assert_close(out.alpha[0, ..., 0], alpha, atol=1e-5, rtol=1e-4)
    expected = alpha[..., None] * color[0] + (1 - alpha[..., None]) * bg
    torch.testing.assert_close(out.features[0], expected, atol=1e-5, rtol=1e-4)
    assert torch.allclose(out.depth[0, ..., 0][alpha > 0], torch.tensor(z), atol=1e-4)
    assert (out.depth[0, ..., 0][alpha == 0] == 0).all()


def test_occlusion_and_early_stop():
    """A near opaque sheet hides a far one; per-pixel compositing stops at T <= 1e-4."""
    n = 400
    xy = torch.stack(torch.meshgrid(torch.linspace(-1, 1, 20), torch.linspace(-1, 1, 20), indexing="ij"), -1).reshape(-1, 2)
    near = torch.cat([xy, torch.full((n, 1), 3.0)], 1)
    far = torch.cat([xy, torch.full((n, 1), 6.0)], 1)
    means = torch.cat([far, near])  # far first: sorting must put the near sheet in front
    colors = torch.cat([torch.tensor([[0.0, 0, 1]]).repeat(n, 1), torch.tensor([[1.0, 0, 0]]).repeat(n, 1)])
    scales = torch.full((2 * n, 3), 0.12)
    quats = torch.tensor([[1.0, 0, 0, 0]]).repeat(2 * n, 1)
    opac = torch.full((2 * n,), 0.99)
    Ks = torch.tensor([[[40.0, 0, 16], [0, 40.0, 16], [0, 0, 1]]])
    out = rasterize(means, quats, scales, opac, colors, torch.eye(4)[None], Ks, 32, 32, backend="cpu")
    centre = out.features[0, 12:20, 12:20]
    assert (centre[..., 0] > 0.99).all() and (centre[..., 2] < 1e-3).all()
    assert torch.allclose(out.depth[0, 12:20, 12:20], torch.tensor(3.0), atol=1e-2)


def _render_with_grads(scene, backend, weights, **kw):
    """Render, back-propagate a fixed random weighting of colours and depth; outputs and input gradients."""
    leaves = [t.detach().clone().requires_grad_(True) for t in scene[:5]]
    out = rasterize(*leaves, *scene[5:], backend=backend, **kw)
    out.meta["means2d"].retain_grad()
    ((out.features * weights[0]).sum() + (out.depth * weights[1]).sum()).backward()
    return out, [t.grad for t in leaves]


def _gsplat_radii(scene, antialiased: bool):
    """The radii gsplat 1.5.3 computes from the same projection: its box is opacity-aware, extend =
    min(3.33, sqrt(2 ln(opacity * 255))) sigma instead of 3.33 (the opacity times the antialiasing
    compensation), and 0 below the 1/255 alpha cut-off."""
    means, quats, scales, opacities, _, viewmats, Ks, width, height = scene
    settings = ProjectionSettings(antialiased=antialiased)
    proj = project_gaussians(means, covariance_3d(quats, scales), viewmats, Ks, width, height, settings)
    a, b, c = proj.conics.unbind(-1)
    det = (a * c - b * b).clamp(min=1e-20)
    sigma = torch.stack([c / det, a / det], -1).sqrt()  # sqrt of the 2D covariance's diagonal
    op = opacities[None].expand_as(a) * (1 if proj.compensations is None else proj.compensations)
    extend = torch.sqrt(2 * torch.log((op * 255).clamp(min=1))).clamp(max=3.33)
    radii = torch.ceil(extend[..., None] * sigma)
    return torch.where(((op >= 1 / 255) & (proj.radii > 0).all(-1))[..., None], radii, 0).int()


@requires_gpu
@pytest.mark.parametrize("d,antialiased", [(3, False), (35, True)])
def test_gsplat_backend_matches_cpu_kernel(d, antialiased):
    """Colours, alpha, depth, every input gradient, ``means2d.grad`` and radii against our CPU kernel.

    Tolerances follow gsplat's fast math: its ``__expf`` can flip a Gaussian's 1/255 alpha cut-off at a
    pixel, a jump of about 4e-3 there, so images are compared pixel by pixel at 5e-3 with a few flips
    allowed, and gradients by direction and norm."""
    scene = random_scene(5000, d, width=128, height=96)
    g = torch.Generator().manual_seed(1)
    weights = (torch.randn(2, 96, 128, d, generator=g), torch.randn(2, 96, 128, 1, generator=g))
    cpu, cpu_grads = _render_with_grads(scene, "cpu", weights, antialiased=antialiased)
    gpu_scene = [t.cuda() if torch.is_tensor(t) else t for t in scene]
    gpu, gpu_grads = _render_with_grads(gpu_scene, "gsplat", [w.cuda() for w in weights], antialiased=antialiased)
    for name, a, b in (("features", cpu.features, gpu.features), ("alpha", cpu.alpha, gpu.alpha)):
        diff = (b.detach().cpu() - a.detach()).abs()
        assert diff.max() < 2e-2 and (diff > 5e-3).float().mean() < 1e-3, name
    covered = (cpu.alpha > 0.5) & (gpu.alpha.cpu() > 0.5)
    depth_rel = ((gpu.depth.detach().cpu() - cpu.depth.detach()).abs() / cpu.depth.detach().clamp(min=1e-6))[covered]
    assert depth_rel.median() < 1e-4 and (depth_rel > 1e-2).float().mean() < 1e-3
    names = ("means", "quats", "scales", "opacities", "features")
    for name, a, b in zip(names, cpu_grads, gpu_grads, strict=True):
        a, b = a.flatten(), b.cpu().flatten()
        assert torch.nn.functional.cosine_similarity(a, b, dim=0) > 0.99, name
        assert abs(b.norm() / a.norm() - 1) < 0.05, name
    grad2d_cpu, grad2d_gpu = cpu.meta["means2d"].grad, gpu.meta["means2d"].grad.cpu()
    assert torch.nn.functional.cosine_similarity(grad2d_cpu.flatten(), grad2d_gpu.flatten(), dim=0) > 0.99
    expected = _gsplat_radii(scene, antialiased)
    radii = gpu.meta["radii"].cpu()
    assert radii.dtype == torch.int32 and radii.shape == expected.shape
    both = (radii > 0).all(-1) & (expected > 0).all(-1)
    assert ((radii > 0).all(-1) == (expected > 0).all(-1)).float().mean() > 0.995  # the same Gaussians drawn
    assert (radii[both] - expected[both]).abs().max() <= 1


def test_noncontiguous_inputs_render_the_same():
    scene = random_scene(500, 4)
    base = rasterize(*scene, backend="cpu")
    strided = list(scene)
    strided[4] = torch.stack([scene[4], scene[4]], dim=-1).flatten(1)[:, ::2]  # same values, stride 2
    strided[0] = scene[0].t().contiguous().t()
    assert not strided[4].is_contiguous() and not strided[0].is_contiguous()
    torch.testing.assert_close(rasterize(*strided, backend="cpu").features, base.features)


@pytest.mark.parametrize(
    "index,value,match",
    [
        (0, torch.zeros(10, 2), "means must have shape"),
        (1, torch.zeros(9, 4), "quats must have shape"),
        (2, torch.tensor([[0.1, 0.1, float("nan")]]).repeat(10, 1), "scales contains NaN"),
        (0, torch.tensor([[0.0, float("inf"), 4.0]]).repeat(10, 1), "means contains NaN or inf"),
        (4, torch.zeros(10, 0), "at least one channel"),
        (5, torch.eye(3)[None], "viewmats must have shape"),
        (6, torch.eye(3)[None].repeat(2, 1, 1), "Ks must have shape"),
        (7, 0, "width must be a positive int"),
        (8, -4, "height must be a positive int"),
        (3, torch.zeros(10, dtype=torch.float64), "opacities has dtype"),
    ],
)
def test_bad_input_names_the_argument(index, value, match):
    scene = random_scene(10, 3, cameras=1)
    scene[index] = value
    with pytest.raises(ValueError, match=match):
        rasterize(*scene)


def test_mixed_devices_and_wrong_backend_are_reported():
    scene = random_scene(10, 3, cameras=1)
    scene[6] = scene[6].to("meta")
    with pytest.raises(ValueError, match="Ks is on meta"):
        rasterize(*scene)
    with pytest.raises(ValueError, match="needs CUDA tensors"):
        rasterize(*random_scene(10, 3, cameras=1), backend="gsplat")
