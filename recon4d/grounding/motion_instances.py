"""Instance id masks from the priors' dynamic masks, for clips that come without annotations.

Why: without id masks the objects were the scaffold's node clusters, and on real
clips a single moving subject falls apart into many of them (DAVIS blackswan, full
``cpu-preview`` fit: 7 clusters for one swan, three of them never moving), so every
question about "the swan" was "ambiguous". The dynamic mask the fit was trained with
says where something moves in each frame; its connected regions, chained from frame
to frame where they overlap, are one id each. They then go the way annotations go
(``objects.find_objects``): each dynamic Gaussian takes its majority id, and the
object's centre and apparent size are read from its region in each frame.

A region that overlaps nothing in the frame before is also matched against the last
regions of ids that ended within ``GAP_FRAMES`` frames: where the mask loses a subject
for a few frames (DAVIS bear, full ``cpu-preview`` fit: frames 37-41 have no motion
mask at all), it is the same subject after the gap, not a second one ("the bear" was
"ambiguous" between the bear before and the bear after).

What it cannot do: two subjects whose regions touch, or overlap from one frame to the
next, become one; a subject the motion mask misses in a frame is absent there (the
masks' recall on real clips is well below their precision, see docs/decisions.md);
a subject that moves more than its own extent across a gap is a new id after it.
"""

from __future__ import annotations

import cv2
import numpy as np

MIN_REGION = 0.001  # regions smaller than this share of the image are mask noise
MIN_TOTAL = 0.05  # an id whose pixels over the clip are under this share of the largest id's is noise
GAP_FRAMES = 10  # an id that ended at most this many frames before may go on in a region that overlaps its last one
GAP_OVERLAP = 0.3  # ... when the two overlap in at least this share of the smaller of them


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

    def join(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    last: dict[int, tuple[int, np.ndarray]] = {}  # region -> (frame, its pixels): each id's latest region
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
                join(a, b)
            _bridge_gap(labels, t, last, root, join)
        for region in ids[keep].tolist():
            last[region] = (t, labels[t] == region)
        for region in [r for r, (frame, _) in last.items() if t - frame > GAP_FRAMES]:
            del last[region]  # too long ago to be bridged to: drop its pixels
    roots = np.array([root(i) for i in range(len(parent))])
    flat = roots[labels]
    area = np.bincount(flat.ravel(), minlength=len(parent))
    area[0] = 0
    order = np.argsort(-area, kind="stable")
    new = np.zeros(len(parent), np.int64)
    kept = [r for r in order if area[r] > 0 and area[r] >= MIN_TOTAL * area.max()]
    new[kept] = np.arange(1, len(kept) + 1)
    return new[flat]


def _bridge_gap(labels: np.ndarray, t: int, last: dict, root, join) -> None:
    """Join each region of frame ``t`` that overlaps nothing in frame ``t - 1`` to the id whose last region,
    at most ``GAP_FRAMES`` frames back and not in frame ``t - 1``, it overlaps most (``GAP_OVERLAP``)."""
    alive = {root(r) for r in np.unique(labels[t - 1]).tolist() if r}
    ended: dict[int, tuple[int, np.ndarray]] = {}
    for region, (frame, pixels) in last.items():
        r = root(region)
        if r not in alive and (r not in ended or frame > ended[r][0]):
            ended[r] = (frame, pixels)
    if not ended:
        return
    for region in np.unique(labels[t]).tolist():
        if not region:
            continue
        pixels = labels[t] == region
        if labels[t - 1][pixels].any():
            continue
        area = int(pixels.sum())
        best, best_share = None, GAP_OVERLAP
        for r, (_, old) in ended.items():
            share = (pixels & old).sum() / max(min(area, int(old.sum())), 1)
            if share >= best_share:
                best, best_share = r, share
        if best is not None:
            join(region, best)
