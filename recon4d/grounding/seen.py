"""Where an object is in each frame as the input shows it: its id mask lifted with the depth prior.

Why not the fitted Gaussians: a fit explains part of an evenly coloured spinning
object with static Gaussians and lets its dynamic Gaussians smear, so any centre
taken from them (a centroid, or the body point of per-frame rigid fits) wanders
by up to a few object sizes and a spinning object reads as travelling. The id
mask says exactly where the object is seen, and the depth prior (the fit's own
depth supervision, aligned to its cameras) says how far away; neither depends
on how the fit shared the object out among its Gaussians.

How: in each frame that shows the object whole (``shape.whole_frames``: off the
image border and touching no nearer object, so that the mask is not cut), the
mask's pixels are lifted with the depth prior and the median of those points is
the centre. It is the centre of the visible side, nearer the camera than the
body's centre by a fraction of the object's size: a near-constant offset that
motion measures do not see. Frames that do not show the object whole are
filled in along the clip from those that do.
"""

from __future__ import annotations

import numpy as np

from recon4d.grounding.shape import whole_frames

MIN_WHOLE = 0.5  # share of the frames that must show the object whole for its seen centres to be used
MIN_DEPTH_PIXELS = 4  # mask pixels with a valid depth a frame needs


def seen_centres(masks: np.ndarray, mask_id: int, K: np.ndarray, viewmats: np.ndarray, depth: np.ndarray,
                 depths: dict[int, np.ndarray]) -> np.ndarray | None:
    """World centre ``[T, 3]`` of object ``mask_id`` per frame, or None when too few frames show it whole.

    ``masks`` are the id masks ``[T, Hm, Wm]``; ``K`` the intrinsics at the depth
    prior's resolution ``depth`` ``[T, H, W]``; ``depths`` the per-frame camera
    depth of every mask id (for ``whole_frames``' occlusion order).
    """
    T, H, W = depth.shape
    rows = ((np.arange(H) + 0.5) * masks.shape[1] / H).astype(np.int64)
    cols = ((np.arange(W) + 0.5) * masks.shape[2] / W).astype(np.int64)
    centres = np.full((T, 3), np.nan)
    for t in whole_frames(masks, mask_id, depths):
        ys, xs = np.nonzero(masks[t][rows][:, cols] == mask_id)
        z = depth[t, ys, xs].astype(np.float64)
        ok = np.isfinite(z) & (z > 0)
        if ok.sum() < MIN_DEPTH_PIXELS:
            continue
        pix = np.stack([xs[ok] + 0.5, ys[ok] + 0.5, np.ones(ok.sum())])
        cam = np.median(np.linalg.solve(K, pix).T * z[ok, None], axis=0)
        centres[t] = viewmats[t, :3, :3].T @ (cam - viewmats[t, :3, 3])
    seen = np.nonzero(np.isfinite(centres[:, 0]))[0]
    if len(seen) < max(2, MIN_WHOLE * T):
        return None
    frames = np.arange(T)
    return np.stack([np.interp(frames, seen, centres[seen, k]) for k in range(3)], axis=1)
