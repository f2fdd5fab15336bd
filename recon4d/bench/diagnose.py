"""Where a fitted scene's training-view error is: the moving objects, the background, or no surface at all.

Why: a clip that falls short of a PSNR target can be short for different reasons, and each asks
for different work. The moving objects (their masks, the scaffold's motion), the background
(the camera, the depth, the time budget of the fit) or pixels that no Gaussian covers (a hole the
fit cannot grow into). The totals of ``recon4d bench davis`` say how much a clip falls short; this
says where, from the finished fit alone: every training frame is rendered at the fit's own cameras
and its squared error is split by the priors' dynamic mask (the id masks where the input has them).

The numbers (over the training frames, so that they break down ``psnr_train``):

- ``psnr_static`` / ``psnr_dynamic``: the mean per-frame PSNR outside / inside the dynamic mask
  (frames without dynamic pixels leave the second out);
- ``dynamic_px``: the mask's share of the pixels; ``dynamic_err``: its share of the squared error.
  An error share well above the pixel share means the moving objects limit the clip;
- ``uncovered``: the share of pixels whose rendered opacity stays under one half;
- ``static_shift_px``: the median over the frames of how far (in pixels) the whole render has to be
  shifted to match the frame's background best (:func:`recon4d.render.alignment.image_shift`). Well
  above a few tenths, the camera (its solve or the fit's pose refinement; a shift drifting with time
  can also be the background's depth, parallax) limits the background;
- ``static_edge_err``: the share of the background's squared error on its most textured fifth (the
  pixels with the strongest image gradient). About 0.2 means the error is spread evenly (noise, colour);
  far above it, with a small shift, the fit has not resolved the detail (its Gaussians, steps or
  resolution).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import Tensor

from recon4d.render import rasterize
from recon4d.render.alignment import image_gradient, image_shift
from recon4d.render.metrics import psnr
from recon4d.scene.data import load_scene_data
from recon4d.scene.model import RGB
from recon4d.scene.state import load_scene
from recon4d.scene_folder import SceneFolder

UNCOVERED_ALPHA = 0.5
EDGE_SHARE = 0.2  # the most textured fifth of the background


def _mean_finite(values: list[float]) -> float | None:
    """Mean of the finite values (a frame rendered without error has an infinite PSNR), None without any."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else None


def error_split(scene_dir: Path, frames: list[int] | None = None) -> dict:
    """The numbers of the module docstring for the fit in ``scene_dir``, over ``frames`` (default: all)."""
    scene, _, _ = load_scene(SceneFolder(scene_dir).model)
    return split_errors(scene, load_scene_data(scene_dir), frames)


def split_errors(scene, data, frames: list[int] | None = None) -> dict:
    """``error_split`` of a loaded scene against its data (``load_scene_data``: frames, fitted cameras, masks)."""
    frames = list(range(data.frames)) if frames is None else frames
    static_psnr, dynamic_psnr, shifts = [], [], []
    err_static = err_dynamic = err_edges = 0.0
    dynamic_px = uncovered_px = total_px = 0
    with torch.no_grad():
        for t in frames:
            out = rasterize(*scene.at(t).as_args(), data.viewmats[t:t + 1], data.K[None], data.width, data.height)
            rgb = out.features[0, ..., RGB].clamp(0, 1)
            image, moving = data.images[t], data.dynamic_mask[t]
            squared = ((rgb - image).double() ** 2).sum(-1)  # [H, W], summed over the three channels
            n_moving = int(moving.sum())
            e_moving, e_static = float(squared[moving].sum()), float(squared[~moving].sum())
            if n_moving < moving.numel():
                static_psnr.append(float(psnr(rgb[~moving], image[~moving])))
                shifts.append(float(image_shift(rgb, image, ~moving).norm()))
                err_edges += float(squared[~moving & most_textured(image, ~moving)].sum())
            if n_moving:
                dynamic_psnr.append(float(psnr(rgb[moving], image[moving])))
            err_static += e_static
            err_dynamic += e_moving
            dynamic_px += n_moving
            uncovered_px += int((out.alpha[0, ..., 0] < UNCOVERED_ALPHA).sum())
            total_px += moving.numel()
    total_err = err_static + err_dynamic
    return {"psnr_static": _mean_finite(static_psnr), "psnr_dynamic": _mean_finite(dynamic_psnr),
            "dynamic_px": dynamic_px / total_px if total_px else None,
            "dynamic_err": err_dynamic / total_err if total_err > 0 else None,
            "uncovered": uncovered_px / total_px if total_px else None,
            "static_shift_px": float(torch.tensor(shifts).median()) if shifts else None,
            "static_edge_err": err_edges / err_static if err_static > 0 else None}


def most_textured(image: Tensor, region: Tensor, share: float = EDGE_SHARE) -> Tensor:
    """The ``share`` of ``region``'s pixels with the strongest gradient of ``image`` [H, W, 3], as a mask."""
    gx, gy = image_gradient(image.double().mean(-1, keepdim=True))
    magnitude = (gx.abs() + gy.abs())[..., 0]
    return region & (magnitude >= torch.quantile(magnitude[region], 1 - share))
