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

Two subjects whose regions touch after each was seen apart for a few frames keep their ids
(``_chain`` splits the joint region between them). What it cannot do: two subjects that touch
from the start, or within ``SETTLED_FRAMES`` of one appearing, become one; a subject the motion
mask misses in a frame is absent there (the masks' recall on real clips is well below their
precision, see docs/decisions.md); a subject that moves more than its own extent across a gap
is a new id after it.
"""

from __future__ import annotations

import cv2
import numpy as np

MIN_REGION = 0.001  # regions smaller than this share of the image are mask noise
MIN_TOTAL = 0.05  # an id whose pixels over the clip are under this share of the largest id's is noise
GAP_FRAMES = 10  # an id that ended at most this many frames before may go on in a region that overlaps its last one
GAP_OVERLAP = 0.3  # ... when the two overlap in at least this share of the smaller of them
SETTLED_FRAMES = 3  # an id this many frames old is a subject: a region joining it to another is split between them


def motion_instances(dynamic: np.ndarray) -> np.ndarray:
    """Id masks ``[T, H, W]`` (0 = background, 1 = the largest over the clip, ...) from boolean ``dynamic``."""
    T, H, W = dynamic.shape
    labels = np.zeros((T, H, W), np.int64)
    parent: list[int] = [0]  # union-find over the regions of all frames; region 0 is the background
    born: list[int] = [0]  # the frame each region appears in (a root is its group's first region)

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def join(a: int, b: int) -> None:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    def new_region(t: int) -> int:
        parent.append(len(parent))
        born.append(t)
        return parent[-1]

    last: dict[int, tuple[int, np.ndarray]] = {}  # region -> (frame, its pixels): each id's latest region
    for t in range(T):
        n, comp, stats, _ = cv2.connectedComponentsWithStats(dynamic[t].astype(np.uint8), connectivity=8)
        keep = np.nonzero(stats[:, cv2.CC_STAT_AREA] >= MIN_REGION * H * W)[0]
        ids = np.zeros(n, np.int64)
        ids[keep[keep > 0]] = [new_region(t) for _ in keep[keep > 0]]
        labels[t] = ids[comp]
        if t:
            _chain(labels, t, root, join, born, new_region)
            _bridge_gap(labels, t, last, root, join)
        for region in np.unique(labels[t][labels[t] > 0]).tolist():
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


def _chain(labels: np.ndarray, t: int, root, join, born: list[int], new_region) -> None:
    """Join each region of frame ``t`` to the ids it overlaps in frame ``t - 1``, but for the ids settled for
    ``SETTLED_FRAMES``: such an id goes on in the region that holds most of its pixels (its successor), and a
    region that is no settled id's successor is a piece of the one it shares most pixels with; a region that
    is the successor of two or more settled ids is split between them, each pixel to the nearest one's region
    in frame ``t - 1``.

    Why split: two subjects that pass close (a cylinder following a ball, two dancers) touch in a frame or
    two, and a join then made one id of them for the whole clip. Why only settled ids: a subject's mask
    falls apart into pieces now and then, and pieces that appear and rejoin within a few frames are one.
    Why successors: after the subjects part, the split's boundary leaves a few pixels of one on the
    other's region; a join there would make them one again.
    """
    prev = np.array([root(int(i)) for i in range(int(labels[t - 1].max()) + 1)])[labels[t - 1]]
    both = (prev > 0) & (labels[t] > 0)
    pairs, counts = np.unique(np.stack([prev[both], labels[t][both]]), axis=1, return_counts=True)
    shared = {(r, region): n for (r, region), n in zip(pairs.T.tolist(), counts.tolist())}
    successor = {}
    for (r, region), n in shared.items():
        if n > shared.get((r, successor.get(r)), 0):
            successor[r] = region
    for region in np.unique(labels[t][labels[t] > 0]).tolist():
        pixels = labels[t] == region
        over = [int(r) for r in np.unique(prev[pixels]) if r]
        settled = [r for r in over if t - born[r] >= SETTLED_FRAMES]
        heirs = [r for r in settled if successor[r] == region]
        if len(heirs) < 2:  # one subject goes on here, or a piece of the one it shares most with
            goes_on = heirs or sorted(settled, key=lambda r: shared[(r, region)])[-1:]
            for r in over:
                if r not in settled or r in goes_on:
                    join(region, r)
            continue
        distance = np.stack([cv2.distanceTransform((prev != r).astype(np.uint8), cv2.DIST_L2, 3) for r in heirs])
        nearest = np.argmin(distance[:, pixels], axis=0)
        ys, xs = np.nonzero(pixels)
        for k, r in enumerate(heirs):
            part = new_region(t)
            labels[t][ys[nearest == k], xs[nearest == k]] = part
            join(part, r)


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
