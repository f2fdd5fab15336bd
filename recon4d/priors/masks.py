"""Dynamic masks: where the observed motion is one no static point could make under the solved cameras.

Why after the camera fit: once K and the poses are known, a static pixel's
motion is confined (:mod:`recon4d.priors.epipolar`): to one point for a camera
that only rotates, to a half-line for one that translates (the epipolar line,
from the point at infinity towards the epipole). The distance from there is the
residual. It needs no depth, which matters because the offline fallback depth
is wrong between tracks and on objects. When the depth is trusted (a learned
model, user files) the full rigid-flow residual is used instead: it also sees
motion along the epipolar line, which the epipolar test cannot. A trusted depth
is still off by some percent, and the flow that error moves is that fraction of
the parallax (the part of the rigid flow due to the camera's translation), so
the residual is forgiven ``depth_tol`` times the parallax: without that, the
near ground of a synth orbit (the most parallax) flared into false detections
(docs/decisions.md).

Slowly moving objects move less than the flow noise from one frame to the next,
so residuals are measured over a ``span`` of frames through the chained flow,
forward and backward; a pixel keeps the smaller of the two, because the
background an object is about to cover (or has just uncovered) only fails one
direction while the object fails both.

Why the residual alone flickers: a followed object (a panning camera keeping a
swan in frame) or one that pauses moves like the background in some frames, and
a frame-by-frame threshold then drops it. Two things hold the decision over
time. The residual of each frame is averaged with its ``window`` neighbours,
carried along the flow, so a pixel's evidence is that of the same surface point
over several frames. And tracks are labelled once for their whole lifetime
(:class:`TrackMotion`: dynamic when most of their frame pairs, at
several spans, violate the static constraint); a dynamic track seeds its region
in every frame where it is visible, and the mask grows from the seeds over
pixels with at least half the threshold's residual (hysteresis), so a frame
where the object's evidence dips keeps the region its tracks vouch for.

The threshold is ``thresh_px`` or ``k_sigma`` robust standard deviations of
the frame's residual, whichever is larger. Flow is estimated over patches, so the
residual spills a few pixels past an object's edge; a region's pixels are
therefore kept only where the residual is at least ``edge_frac`` of the largest
within ``edge_radius_px`` (the half-maximum rule used to locate a blurred edge,
applied locally), then cleaned by morphology and merged with the user's masks
(:func:`merge_user`: the regions touching an annotated object or holding a moving track). Why locally and
not against the region's own peak: a body's parts move at different speeds (a
dancer's legs sweep while the torso turns slowly), and a cut at a share of the
fastest part's residual dropped the rest of the body; against the 15 annotated
DAVIS clips the local rule's masks agree with the annotations far better
(docs/decisions.md).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import cv2
import numpy as np

from recon4d.geometry import pixel_cells_np
from recon4d.priors.epipolar import static_residual
from recon4d.priors.flow import sample


def rigid_flow(depth: np.ndarray, K: np.ndarray, view_a: np.ndarray, view_b: np.ndarray) -> np.ndarray:
    """Flow ``[H, W, 2]`` that a static scene with ``depth`` (frame a) induces from camera a to camera b."""
    H, W = depth.shape
    gy, gx = np.mgrid[0:H, 0:W] + 0.5
    ray = np.stack([(gx - K[0, 2]) / K[0, 0], (gy - K[1, 2]) / K[1, 1], np.ones_like(gx)], -1)
    rel = view_b @ np.linalg.inv(view_a)
    X = (ray * depth[..., None]) @ rel[:3, :3].T + rel[:3, 3]
    z = np.maximum(X[..., 2], 1e-6)
    u = K[0, 0] * X[..., 0] / z + K[0, 2]
    v = K[1, 1] * X[..., 1] / z + K[1, 2]
    return np.stack([u - gx, v - gy], -1).astype(np.float32)


def rotation_flow(K: np.ndarray, view_a: np.ndarray, view_b: np.ndarray, H: int, W: int) -> np.ndarray:
    """Flow ``[H, W, 2]`` of the rays at infinity from camera a to camera b: only the rotation moves them
    (the homography K R K^-1)."""
    gy, gx = np.mgrid[0:H, 0:W] + 0.5
    rel = view_b[:3, :3] @ view_a[:3, :3].T
    p = np.stack([gx, gy, np.ones_like(gx)], -1) @ (K @ rel @ np.linalg.inv(K)).T
    return np.stack([p[..., 0] / p[..., 2] - gx, p[..., 1] / p[..., 2] - gy], -1).astype(np.float32)


def parallax(depth: np.ndarray, K: np.ndarray, view_a: np.ndarray, view_b: np.ndarray,
             rigid: np.ndarray | None = None) -> np.ndarray:
    """``[H, W]`` px: length of the part of :func:`rigid_flow` due to the camera's translation (the rigid
    flow minus :func:`rotation_flow`); ``rigid``: that rigid flow, when the caller has it already."""
    rigid = rigid_flow(depth, K, view_a, view_b) if rigid is None else rigid
    return np.linalg.norm(rigid - rotation_flow(K, view_a, view_b, *depth.shape), axis=-1)


def each_frame(frame: Callable[[int], np.ndarray], T: int) -> list[np.ndarray]:
    """``[frame(0), ..., frame(T - 1)]`` on as many threads as this process may use. Each frame's result
    depends on its own inputs only, so the values are those of a plain loop; the threads run at once because
    the work is whole-frame NumPy and OpenCV calls, which release the GIL (1.4x on 2 cores)."""
    with ThreadPoolExecutor(len(os.sched_getaffinity(0))) as pool:
        return list(pool.map(frame, range(T)))


def chain(flows: np.ndarray, pos: np.ndarray, t: int, u: int) -> np.ndarray:
    """Positions ``pos [N, 2]`` of frame t carried to frame u through consecutive flows (forward flows
    when u > t, backward flows when u < t)."""
    step = 1 if u > t else -1
    for s in range(t, u, step):
        pos = pos + sample(flows[s if step > 0 else s - 1], pos)
    return pos


def pixel_centres(H: int, W: int) -> np.ndarray:
    """``[H*W, 2]`` (x, y) of every pixel centre, row by row."""
    gy, gx = np.mgrid[0:H, 0:W] + 0.5
    return np.stack([gx, gy], -1).reshape(-1, 2)


def along_flow(fwd: np.ndarray, bwd: np.ndarray, pos: np.ndarray, t: int, lo: int, hi: int):
    """Yield ``(u, positions in frame u)`` of frame t's points ``pos``, carried one frame at a time forward
    to ``hi`` and then backward to ``lo``."""
    for flows, step, end in ((fwd, 1, hi + 1), (bwd, -1, lo - 1)):
        carried = pos
        for u in range(t + step, end, step):
            carried = carried + sample(flows[u - 1 if step > 0 else u], carried)
            yield u, carried


RESIDUAL_CAP_PX = 1e4
"""Residuals are capped here where they are stored or filtered: far beyond any threshold, finite in float16/32."""


@dataclass(frozen=True)
class MotionMasks:
    span: int = 2  # frames over which the flow is chained before comparing
    thresh_px: float = 1.25
    k_sigma: float = 4.0
    min_area: int = 12  # connected components smaller than this (pixels) are dropped
    edge_frac: float = 0.75  # a region keeps the pixels above this fraction of the largest residual near them
    edge_radius_px: int = 4  # 'near': about half the flow's 8-px patch, the reach of its spill past an edge
    window: int = 2  # frames on each side whose residual, carried along the flow, is averaged in
    vote: int = 4  # frames on each side whose masks, carried along the flow, vote on each pixel
    user_reach_px: int = 3  # with user masks, detected regions within this distance of one are kept
    depth_tol: float = 0.05  # relative error of a trusted depth: forgiven as this fraction of the parallax
    # without a trusted depth: the epipolar residual forgives this fraction of the parallax (``static_residual``)
    parallax_tol: float = 0.1
    name: str = "motion"

    def residual(self, fwd: np.ndarray, bwd: np.ndarray, K: np.ndarray, viewmats: np.ndarray,
                 max_inv_depth: np.ndarray, depth: np.ndarray | None = None) -> np.ndarray:
        """``[T, H, W]`` float32 px: epipolar residual (``max_inv_depth [T]`` bounds the parallax), or the
        rigid-flow residual less ``depth_tol`` of the parallax when ``depth`` is given."""
        T, H, W = fwd.shape[0] + 1, *fwd.shape[1:3]
        grid = pixel_centres(H, W)

        def frame(t: int) -> np.ndarray:
            resid = np.full((H, W), np.inf, np.float32)
            for u in (min(t + self.span, T - 1), max(t - self.span, 0)):
                if u == t:
                    continue
                pos = chain(fwd if u > t else bwd, grid, t, u)
                if depth is None:
                    r = static_residual(grid, pos, K, viewmats[t], viewmats[u], max_inv_depth[t],
                                        self.parallax_tol).reshape(H, W)
                else:
                    rigid = rigid_flow(depth[t], K, viewmats[t], viewmats[u])
                    r = np.linalg.norm((pos - grid).reshape(H, W, 2) - rigid, axis=-1)
                    r = np.maximum(r - self.depth_tol * parallax(depth[t], K, viewmats[t], viewmats[u], rigid), 0.0)
                resid[:] = np.minimum(resid, r)
            return resid

        return np.stack(each_frame(frame, T))

    def smooth(self, resid: np.ndarray, fwd: np.ndarray, bwd: np.ndarray) -> np.ndarray:
        """Each frame's residual averaged with its ``window`` neighbours' at the same surface points."""
        T, H, W = resid.shape
        grid = pixel_centres(H, W)

        def frame(t: int) -> np.ndarray:
            acc, n = resid[t].astype(np.float64).ravel(), 1
            for u, pos in along_flow(fwd, bwd, grid, t, max(0, t - self.window), min(T - 1, t + self.window)):
                acc = acc + sample(resid[u][..., None], pos)[:, 0]
                n += 1
            return (acc / n).reshape(H, W)

        return np.stack(each_frame(frame, T)).astype(resid.dtype)

    def majority(self, masks: np.ndarray, fwd: np.ndarray, bwd: np.ndarray) -> np.ndarray:
        """Each pixel takes the majority label of the same surface point over ``2 vote + 1`` frames around
        it (a temporal median along the flow; the window slides inwards at the video's ends): an object
        missed in a few frames is restored from the frames around them, and a patch of water that flares
        up in one frame is dropped."""
        T, H, W = masks.shape
        grid = pixel_centres(H, W)

        def frame(t: int) -> np.ndarray:
            votes, n = masks[t].astype(np.float32).ravel(), 1
            lo = min(max(0, t - self.vote), max(0, T - 1 - 2 * self.vote))  # the window slides at the ends
            hi = min(T - 1, lo + 2 * self.vote)
            for u, pos in along_flow(fwd, bwd, grid, t, lo, hi):
                votes += sample(masks[u][..., None].astype(np.float32), pos)[:, 0] > 0.5
                n += 1
            return (votes > n / 2).reshape(H, W)

        return np.stack(each_frame(frame, T)).astype(masks.dtype)

    def compute(self, fwd: np.ndarray, bwd: np.ndarray, K: np.ndarray, viewmats: np.ndarray,
                max_inv_depth: np.ndarray, depth: np.ndarray | None = None, tracks: tuple | None = None,
                user: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(dynamic ``[T, H, W]`` bool, smoothed residual ``[T, H, W]`` float32 px).

        ``depth``: a trusted depth (switches to the rigid-flow residual); ``tracks``: (xy, visible,
        dynamic) whose dynamic members seed the regions; ``user``: masks merged in at the end.
        """
        resid = self.smooth(self.residual(fwd, bwd, K, viewmats, max_inv_depth, depth), fwd, bwd)
        T, H, W = resid.shape
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
        near = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * self.edge_radius_px + 1,) * 2)
        moving = None if tracks is None else [pixel_cells_np(tracks[0][t, tracks[1][t] & tracks[2]], W, H)
                                              for t in range(T)]  # the dynamic tracks' pixels per frame

        def frame(t: int) -> np.ndarray:
            thresh = max(self.thresh_px, self.k_sigma * 1.4826 * np.median(resid[t]))
            seeds = resid[t] > thresh
            if moving is not None:
                seeds[moving[t][:, 1], moving[t][:, 0]] = True
            low = (resid[t] > 0.5 * thresh) | seeds
            n, lab = cv2.connectedComponents(low.astype(np.uint8), connectivity=8)
            m = np.isin(lab, np.unique(lab[seeds & (lab > 0)])).astype(np.uint8)
            capped = np.minimum(resid[t], RESIDUAL_CAP_PX).astype(np.float32)  # OpenCV's dilate wants float32
            m[capped < self.edge_frac * cv2.dilate(capped, near)] = 0
            m = cv2.morphologyEx(cv2.morphologyEx(m, cv2.MORPH_OPEN, kernel), cv2.MORPH_CLOSE, kernel)
            n, lab, stats, _ = cv2.connectedComponentsWithStats(m, connectivity=8)
            small = np.flatnonzero(stats[:, cv2.CC_STAT_AREA] < self.min_area)
            m[np.isin(lab, small[small > 0])] = 0
            return m.astype(bool)

        masks = self.majority(np.stack(each_frame(frame, T)), fwd, bwd)
        if user is not None:
            masks = merge_user(masks, user > 0, self.user_reach_px, moving)
        return masks, resid


def merge_user(motion: np.ndarray, user: np.ndarray, reach_px: int = 3,
               moving_px: list[np.ndarray] | None = None) -> np.ndarray:
    """Per frame, the user's masks plus the detected regions that touch them (within ``reach_px``) or hold
    a moving track (``moving_px[t]``: ``[n, 2]`` integer pixels, ``geometry.pixel_cells_np``, of the tracks
    labelled moving that frame t sees).

    Why not the plain union: the user's masks name the objects a user cares about, and a detected
    region away from all of them is mostly flow noise where the static test is weak
    (sky, water; on DAVIS horsejump-high drifting clouds made 38% of the union). Each
    such region would be fitted by dynamic Gaussians and take scaffold nodes from the
    object. Regions touching an annotated object still extend it (a tail, a whip). Why a
    moving track keeps a region: a track fails the static test over several frame gaps
    of its whole life, which flow noise on clouds rarely does (horsejump-high: 18% of the
    far regions' area holds one) and a moving bystander does (DAVIS breakdance's dancing
    crowd, not annotated: 83%); a bystander left out is fitted as static background, blurred.
    """
    out = user.copy()
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * reach_px + 1, 2 * reach_px + 1))
    for t in range(len(motion)):
        _, lab = cv2.connectedComponents(motion[t].astype(np.uint8), connectivity=8)
        near = cv2.dilate(user[t].astype(np.uint8), kernel) > 0
        keep = np.unique(lab[near & (lab > 0)])
        if moving_px is not None:
            keep = np.union1d(keep, lab[moving_px[t][:, 1], moving_px[t][:, 0]])
        out[t] |= np.isin(lab, keep) & (lab > 0)
    return out


@dataclass(frozen=True)
class TrackMotion:
    """Lifetime labels of tracks (see the module docstring); the camera's outliers and the dense points
    use them before any mask exists."""

    spans: tuple[int, ...] = (2, 4, 8)  # frame gaps at which each track is tested
    thresh_px: float = 1.25
    k_sigma: float = 4.0
    frac: float = 0.5  # a track is dynamic when more than this fraction of its tests fail
    parallax_tol: float = 0.1  # as ``MotionMasks.parallax_tol``

    def labels(self, xy: np.ndarray, vis: np.ndarray, K: np.ndarray, viewmats: np.ndarray,
               max_inv_depth: np.ndarray) -> np.ndarray:
        """``[P]`` bool: tracks whose motion, over their whole lifetime, no static point could make."""
        T, P = vis.shape
        fails, tests = np.zeros(P), np.zeros(P)
        for s in self.spans:
            if s >= T:
                continue
            per = []
            for t in range(T - s):
                both = np.flatnonzero(vis[t] & vis[t + s])
                r = static_residual(xy[t, both].astype(np.float64), xy[t + s, both].astype(np.float64), K,
                                    viewmats[t], viewmats[t + s], max_inv_depth[t], self.parallax_tol)
                per.append((both, r))
            if not per or not sum(len(r) for _, r in per):
                continue
            allr = np.concatenate([r for _, r in per])
            thresh = max(self.thresh_px, self.k_sigma * 1.4826 * np.median(allr))
            for both, r in per:
                np.add.at(fails, both, r > thresh)
                np.add.at(tests, both, 1)
        return (tests > 0) & (fails > self.frac * np.maximum(tests, 1))


def track_dynamic(masks: np.ndarray, xy: np.ndarray, vis: np.ndarray, frac: float = 0.5) -> np.ndarray:
    """``[P]`` bool: a track is dynamic when it lies in the dynamic mask in at least ``frac`` of its visible frames."""
    T, H, W = masks.shape
    q = pixel_cells_np(xy, W, H)
    inside = masks[np.arange(T)[:, None], q[..., 1], q[..., 0]] & vis
    return inside.sum(0) >= frac * np.maximum(vis.sum(0), 1)
