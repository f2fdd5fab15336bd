"""The scene's frames cut to the box around one frame's moving objects, for the ``nodes`` stage.

Why: that stage moves one frame's node transforms, so only the dynamic Gaussians move, and they draw
inside the frame's dynamic mask give or take how far they are off; the pixels beyond a margin around it
give its parameters no gradient but cost a full frame's rasterizer and losses at every step. Shifting the
principal point by the box's corner renders the box's pixels of the full frame; only at the box's edge
can a Gaussian centred well outside it draw differently (the projection clamps its Jacobian to 1.3x the
rendered field of view, as gsplat does), and the margin keeps that edge off the mask.
"""

from __future__ import annotations

import dataclasses

import torch

from recon4d.scene.data import SceneData

MARGIN = 1 / 32
"""The box's margin around the mask, as a share of the frame's longer side (15 pixels at 480x270)."""


def motion_box(mask: torch.Tensor, margin: float = MARGIN) -> tuple[int, int, int, int]:
    """``(x0, y0, x1, y1)``: the box of the pixels of ``mask`` ([H,W] bool) grown by ``margin`` of the longer
    side, within the frame; the whole frame when the mask is empty."""
    H, W = mask.shape
    if not mask.any():
        return 0, 0, W, H
    pad = round(margin * max(H, W))
    rows, cols = mask.any(1).nonzero()[:, 0], mask.any(0).nonzero()[:, 0]
    return (max(int(cols[0]) - pad, 0), max(int(rows[0]) - pad, 0),
            min(int(cols[-1]) + 1 + pad, W), min(int(rows[-1]) + 1 + pad, H))


def cropped(data: SceneData, box: tuple[int, int, int, int]) -> SceneData:
    """``data`` with every frame's images, depth priors and dynamic masks cut to ``box`` (views, no copy) and
    the principal point moved to the box's corner. Tracks, cameras and teachers stay as they are."""
    x0, y0, x1, y1 = box
    K = data.K.clone()
    K[0, 2] -= x0
    K[1, 2] -= y0
    return dataclasses.replace(data, images=data.images[:, y0:y1, x0:x1], depth=data.depth[:, y0:y1, x0:x1],
                               dynamic_mask=data.dynamic_mask[:, y0:y1, x0:x1], K=K)
