"""Dynamic masks: where the observed flow disagrees with the flow the fitted camera predicts.

Why after the camera fit: once K, the poses and a depth map are known, a static
pixel's motion is fully predicted (``rigid_flow``); what the flow does beyond
that is object motion. This is the epipolar/flow-residual test of MoSca, with
the depth term making it work along epipolar lines too. For a static camera the
predicted flow is zero; for pure rotation it does not depend on depth at all.

Slowly moving objects move less than the flow noise from one frame to the next,
so residuals are also measured over a ``span`` of frames through the chained
flow, forward and backward; a pixel keeps the smaller of the two, because the
background an object is about to cover (or has just uncovered) only fails one
direction while the object fails both. The mask is the residual above ``thresh_px`` (or ``k_sigma`` robust
standard deviations of the frame's residual, whichever is larger). Flow is
smoothed over a patch, so the residual spills a few pixels past an object's
edge; each detected region is therefore cut at ``edge_frac`` of its own peak
residual (the half-maximum rule used to locate a blurred edge), then cleaned by
morphology and merged with the user's masks.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

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


@dataclass(frozen=True)
class FlowResidualMasks:
    span: int = 2  # frames over which the flow is chained before comparing
    thresh_px: float = 1.25
    k_sigma: float = 4.0
    min_area: int = 12  # connected components smaller than this (pixels) are dropped
    edge_frac: float = 0.7  # a region keeps the pixels above this fraction of its 90th-percentile residual
    name: str = "flow-residual"

    def compute(self, fwd: np.ndarray, bwd: np.ndarray, depth: np.ndarray, K: np.ndarray,
                viewmats: np.ndarray, user: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(dynamic ``[T, H, W]`` bool, residual ``[T, H, W]`` float32 in pixels)."""
        T, H, W = depth.shape
        resid = np.full((T, H, W), np.inf, np.float32)
        gy, gx = np.mgrid[0:H, 0:W] + 0.5
        grid = np.stack([gx, gy], -1).reshape(-1, 2)
        for t in range(T):
            for flows, step in ((fwd, 1), (bwd, -1)):
                u = t + step * min(self.span, T - 1 - t if step > 0 else t)
                if u == t:
                    continue
                pos = grid.copy()
                for s in range(t, u, step):  # chain the flow from t to u
                    pos = pos + sample(flows[s if step > 0 else s - 1], pos)
                observed = (pos - grid).reshape(H, W, 2)
                r = np.linalg.norm(observed - rigid_flow(depth[t], K, viewmats[t], viewmats[u]), axis=-1)
                resid[t] = np.minimum(resid[t], r)
        masks = np.zeros((T, H, W), bool)
        kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (3, 3))
        for t in range(T):
            sigma = 1.4826 * np.median(resid[t])
            m = (resid[t] > max(self.thresh_px, self.k_sigma * sigma)).astype(np.uint8)
            n, lab = cv2.connectedComponents(m, connectivity=8)
            for c in range(1, n):
                region = lab == c
                m[region & (resid[t] < self.edge_frac * np.percentile(resid[t][region], 90))] = 0
            m = cv2.morphologyEx(cv2.morphologyEx(m, cv2.MORPH_OPEN, kernel), cv2.MORPH_CLOSE, kernel)
            n, lab, stats, _ = cv2.connectedComponentsWithStats(m, connectivity=8)
            small = np.flatnonzero(stats[:, cv2.CC_STAT_AREA] < self.min_area)
            m[np.isin(lab, small[small > 0])] = 0
            masks[t] = m.astype(bool)
        if user is not None:
            masks |= user > 0
        return masks, resid


def track_dynamic(masks: np.ndarray, xy: np.ndarray, vis: np.ndarray, frac: float = 0.5) -> np.ndarray:
    """``[P]`` bool: a track is dynamic when it lies in the dynamic mask in at least ``frac`` of its visible frames."""
    T, H, W = masks.shape
    q = np.clip(np.floor(xy).astype(int), 0, [W - 1, H - 1])
    inside = masks[np.arange(T)[:, None], q[..., 1], q[..., 0]] & vis
    return inside.sum(0) >= frac * np.maximum(vis.sum(0), 1)
