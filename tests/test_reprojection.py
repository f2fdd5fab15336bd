"""The camera solve's reprojection and its hand-written derivatives against autograd through the same
formula written in torch, per observation (:mod:`recon4d.priors.reprojection`)."""

import numpy as np
import pytest
import torch

from recon4d.geometry import rodrigues_torch
from recon4d.priors.reprojection import MIN_DEPTH, Observations, reproject, reprojection_derivatives


def autograd_reproject(f, r_t, t_t, r_r, t_r, rho, obs: Observations) -> torch.Tensor:
    """The reprojection on per-observation copies of every input, so that autograd gives each row's own
    derivatives: X = R_t R_r^T (ray - rho t_r) + rho t_t, projected with the depth clamped."""
    uv = torch.from_numpy(obs.uv_ref)
    ray = torch.stack([(uv[:, 0] - obs.cx) / f, (uv[:, 1] - obs.cy) / f, torch.ones_like(f)], -1)
    Rrel = rodrigues_torch(r_t) @ rodrigues_torch(r_r).transpose(1, 2)
    X = (Rrel @ ray[..., None])[..., 0] + rho[:, None] * (t_t - (Rrel @ t_r[..., None])[..., 0])
    z = X[:, 2].clamp_min(MIN_DEPTH)
    return torch.stack([f * X[:, 0] / z + obs.cx, f * X[:, 1] / z + obs.cy], -1)


@pytest.mark.parametrize("behind", [False, True])
def test_pixels_and_derivatives_equal_autograd_per_observation(behind):
    """Random poses, a frame at the identity and one a hair from it (the Rodrigues formula's Taylor branch),
    points at infinity (rho = 0) and, with ``behind``, many points behind their camera (depth clamped)."""
    rng = np.random.default_rng(3)
    T, M, f = 7, 400, 90.0
    r = rng.normal(0, 0.4, (T, 3))
    r[0], r[1] = 0.0, 1e-6
    t = rng.normal(0, 0.3, (T, 3))
    t[0] = 0.0
    if behind:
        t[2:, 2] = 3.0
    obs = Observations(rng.integers(0, T, M), rng.integers(0, T, M), rng.uniform(0, 128, (M, 2)), 64.0, 48.0)
    rho = rng.uniform(0, 1.5, M)
    rho[:20] = 0.0
    inputs = [torch.tensor(v, requires_grad=True)
              for v in (np.full(M, f), r[obs.frame], t[obs.frame], r[obs.ref], t[obs.ref], rho)]
    expected = autograd_reproject(*inputs, obs)
    np.testing.assert_allclose(reproject(f, r, t, rho, obs), expected.detach().numpy(), rtol=1e-12)
    clamped = (np.abs(expected.detach().numpy()) > 1e5).any(1)  # f X / 1e-6
    if behind:
        assert clamped.sum() > 20
    d = reprojection_derivatives(f, r, t, rho, obs)
    ours = [d.focal, d.rotation_t, d.translation_t, d.rotation_r, d.translation_r, d.inverse_depth]
    for k in (0, 1):
        grads = torch.autograd.grad(expected[:, k].sum(), inputs, retain_graph=True)
        for name, g, mine in zip(("focal", "rotation_t", "translation_t", "rotation_r", "translation_r", "rho"),
                                 grads, ours):
            want = g.numpy().reshape(mine[:, k].shape)
            np.testing.assert_allclose(mine[:, k], want, rtol=1e-9, atol=1e-9 * np.abs(want).max(),
                                       err_msg=f"{name}, coordinate {k}")
