"""A CPU stand-in for ``gsplat`` 1.5.3's ``rasterization``, for the fake-CUDA harness (``tests.fake_cuda``).

Calls are bound to the installed gsplat's own signature; the same input assertions
for the arguments recon4d passes, and the same output format: colours ``[C,H,W,D]`` (the expected depth appended for the
``ED`` modes), alphas ``[C,H,W,1]``, and a meta dict with ``radii`` as int32
``[C,N,2]`` and ``means2d`` ``[C,N,2]`` a non-leaf tensor (its ``.grad`` is what
densification reads). The pixels come from recon4d's CPU backend, run outside the
fake-CUDA mode; the outputs are tagged as CUDA tensors again.

``calls`` records each call's channel count, so a test can check how many passes a
real gsplat would make (it splits more than ``channel_chunk`` channels into chunks).
"""

from __future__ import annotations

import inspect
import types

import gsplat.rendering
import torch
from torch.overrides import _pop_mode_temporarily
from torch.utils._pytree import tree_map

__version__ = "1.5.3"
calls: list[dict] = []
# gsplat's compiled module lives at gsplat.cuda._backend._C (None when it could not be built); a test sets
# it to None to play a machine without the CUDA toolkit.
cuda = types.SimpleNamespace(_backend=types.SimpleNamespace(_C=object()))
# Read before the harness swaps this module in for ``gsplat``.
_GSPLAT_SIGNATURE = inspect.signature(gsplat.rendering.rasterization)


def rasterization(*args, **kwargs):
    from tests.fake_cuda import _tag, is_fake_cuda

    # The call is bound to the installed gsplat's own signature, so a keyword it does not take, or a missing
    # argument, fails here as it would on a GPU.
    call = _GSPLAT_SIGNATURE.bind(*args, **kwargs)
    call.apply_defaults()
    a = types.SimpleNamespace(**call.arguments)
    means, quats, scales, opacities, colors, viewmats, Ks = (
        a.means, a.quats, a.scales, a.opacities, a.colors, a.viewmats, a.Ks)
    render_mode, backgrounds = a.render_mode, a.backgrounds

    N, C = means.shape[-2], viewmats.shape[-3]
    assert means.shape == (N, 3), means.shape
    assert quats.shape == (N, 4), quats.shape
    assert scales.shape == (N, 3), scales.shape
    assert opacities.shape == (N,), opacities.shape
    assert viewmats.shape == (C, 4, 4), viewmats.shape
    assert Ks.shape == (C, 3, 3), Ks.shape
    assert render_mode in ["RGB", "D", "ED", "RGB+D", "RGB+ED"], render_mode
    assert a.sh_degree is None and a.covars is None and not a.packed and not a.distributed, "not in the stand-in"
    assert a.camera_model == "pinhole" and not a.with_ut and not a.with_eval3d, "not in the stand-in"
    assert (colors.dim() == 2 and colors.shape[:-1] == (N,)) or (colors.dim() == 3 and colors.shape[:-1] == (C, N)), \
        colors.shape
    inputs = (means, quats, scales, opacities, colors, viewmats, Ks) + (() if backgrounds is None else (backgrounds,))
    assert all(is_fake_cuda(t) for t in inputs), "gsplat needs every input on the GPU"
    if backgrounds is not None:
        assert backgrounds.shape == (C, colors.shape[-1]), backgrounds.shape
    calls.append({"channels": colors.shape[-1] + (1 if "D" in render_mode else 0), "chunk": a.channel_chunk})

    from recon4d.render.rasterize import rasterize

    with _pop_mode_temporarily():  # plain CPU tensors inside: our backend checks their real device
        out = rasterize(means, quats, scales, opacities, colors, viewmats, Ks, a.width, a.height,
                        near_plane=a.near_plane, far_plane=a.far_plane, eps2d=a.eps2d,
                        antialiased=a.rasterize_mode == "antialiased", backgrounds=backgrounds,
                        tile_size=a.tile_size, backend="cpu")
        radii = out.meta["radii"].to(torch.int32)
        render = out.features if render_mode == "RGB" else torch.cat([out.features, out.depth], dim=-1)
        meta = {"radii": radii.contiguous(), "means2d": out.meta["means2d"], "depths": out.meta["depths"],
                "conics": out.meta["conics"], "width": a.width, "height": a.height, "tile_size": a.tile_size,
                "n_cameras": C, "camera_ids": None, "gaussian_ids": None}
    assert not meta["means2d"].is_leaf or not meta["means2d"].requires_grad
    tree_map(_tag, (render, out.alpha, meta))
    return render, out.alpha, meta
