"""Per-frame motion alignment: each frame's node transforms fitted to that frame's dynamic mask.

Why a stage of its own: the scaffold starts from flow-chained tracks, which die at
fast, articulated motion (a jumping horse keeps few tracks for more than a dozen
frames), so far from the reference frame the nodes are carried by guesses. The
joint stage cannot pull them back: a training step sees one frame, so each frame's
node transforms get a gradient once every T steps, and a photometric loss has no
gradient towards an object that does not overlap its rendering. The masks say
where the object is in every frame.

So, as the ``cameras`` stage does for poses, each frame in turn gets
``steps.motion`` updates of its own node transforms from a fresh optimiser state,
against the dynamic Gaussians rendered alone: a silhouette term (opacity outside
the mask costs its distance to the mask, mask pixels left uncovered cost one
each), colour inside the mask, the frame's tracks and ARAP against the
reference frame, and the depth prior inside the mask (the other terms are all
in the image plane and would let the nodes slide along the line of sight).
Every term depends on frame t's transforms only, so the other frames' rows get a
zero gradient and, with zero moments, no update.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
from torch import Tensor


def outside_distance(masks: Tensor) -> Tensor:
    """Per pixel, the distance in image widths to the nearest mask pixel (0 inside); ``[T, H, W]``.
    A frame with an empty mask gets zeros: there is nothing to pull towards."""
    out = np.zeros(masks.shape, np.float32)
    W = masks.shape[-1]
    for t, m in enumerate(masks.cpu().numpy()):
        if m.any():
            out[t] = cv2.distanceTransform((~m).astype(np.uint8), cv2.DIST_L2, 5) / W
    return torch.from_numpy(out).to(masks.device)


def silhouette_loss(alpha: Tensor, mask: Tensor, distance: Tensor) -> Tensor:
    """Rendered opacity ``alpha [H, W]`` against ``mask [H, W]``: opacity outside weighted by its distance
    to the mask (``distance``, image widths) plus the uncovered share of the mask."""
    m = mask.float()
    spill = (alpha * distance).sum() / alpha.sum().clamp(min=1.0)
    uncovered = ((1 - alpha) * m).sum() / m.sum().clamp(min=1.0)
    return spill + uncovered


def masked_rgb_loss(rgb: Tensor, image: Tensor, mask: Tensor) -> Tensor:
    """Mean L1 colour error over the mask pixels."""
    m = mask[..., None].float()
    return ((rgb - image).abs() * m).sum() / (3 * m.sum()).clamp(min=1.0)
