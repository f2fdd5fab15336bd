"""Instance id masks from the priors' dynamic masks, for clips that come without annotations.

Why: without id masks the objects were the scaffold's node clusters, and on real
clips a single moving subject falls apart into many of them (DAVIS blackswan, full
``cpu-preview`` fit: 7 clusters for one swan, three of them never moving), so every
question about "the swan" was "ambiguous". The dynamic mask the fit was trained with
says where something moves in each frame; its connected regions, chained from frame
to frame where they overlap, are one id each. They then go the way annotations go
(``objects.find_objects``): each dynamic Gaussian takes its majority id, and the
object's centre and apparent size are read from its region in each frame.

What it cannot do: two subjects whose regions touch, or overlap from one frame to the
next, become one; a subject the motion mask misses in a frame is absent there (the
masks' recall on real clips is well below their precision, see docs/decisions.md).
"""

from __future__ import annotations

import cv2
import numpy as np

MIN_REGION = 0.001  # regions smaller than this share of the image are mask noise
MIN_TOTAL = 0.05  # an id whose pixels over the clip are under this share of the largest id's is noise


def motion_instances(dynamic: np.ndarray) -> np.ndarray:
    """Id masks ``[T, H, W]`` (0 = background, 1 = the largest over the clip, ...) from boolean ``dynamic``."""
    T, H, W = dynamic.shape
    labels = np.zeros((T, H, W), np.int64)
    parent: list[int] = [0]  # union-find over the regions of all frames; region 0 is the background

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for t in range(T):
        n, comp, stats, _ = cv2.connectedComponentsWithStats(dynamic[t].astype(np.uint8), connectivity=8)
        keep = np.nonzero(stats[:, cv2.CC_STAT_AREA] >= MIN_REGION * H * W)[0]
        keep = keep[keep > 0]
        ids = np.zeros(n, np.int64)
        ids[keep] = np.arange(len(parent), len(parent) + len(keep))
        parent.extend(ids[keep].tolist())
        labels[t] = ids[comp]
        if t:
            both = (labels[t - 1] > 0) & (labels[t] > 0)
            for a, b in set(zip(labels[t - 1][both].tolist(), labels[t][both].tolist())):
                ra, rb = root(a), root(b)
                if ra != rb:
                    parent[max(ra, rb)] = min(ra, rb)
    roots = np.array([root(i) for i in range(len(parent))])
    flat = roots[labels]
    area = np.bincount(flat.ravel(), minlength=len(parent))
    area[0] = 0
    order = np.argsort(-area, kind="stable")
    new = np.zeros(len(parent), np.int64)
    kept = [r for r in order if area[r] > 0 and area[r] >= MIN_TOTAL * area.max()]
    new[kept] = np.arange(1, len(kept) + 1)
    return new[flat]
