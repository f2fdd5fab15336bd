"""The camera solve's bundle-adjustment problem: which tracks it uses, their observations, and where each
unknown sits in the parameter vector (:class:`ParamLayout`), for :mod:`recon4d.priors.camera`."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from recon4d.priors.reprojection import Observations

# Each frame is seen by at least this many of the adjustment's tracks where it has them (subsample_tracks):
# six pose unknowns, and enough over that for the Cauchy loss to outvote a few bad tracks.
MIN_BA_TRACKS_PER_FRAME = 50


@dataclass(frozen=True)
class ParamLayout:
    """The parameter vector of ``T`` frames and ``P`` tracks: ``[focal, rotation vectors 3*(T-1),
    translations 3*(T-1), inverse depths P, log depth scales T-1 (only with a depth prior)]``. Frame 0's
    pose is the world frame (fixed), so poses and scales start at frame 1."""

    T: int
    P: int
    focal = 0
    """Index of the focal length."""

    @property
    def rotations(self) -> slice:
        return slice(1, 1 + 3 * (self.T - 1))

    @property
    def translations(self) -> slice:
        return slice(1 + 3 * (self.T - 1), 1 + 6 * (self.T - 1))

    @property
    def points(self) -> slice:
        """Each track's inverse depth along the ray of its reference frame."""
        return slice(1 + 6 * (self.T - 1), 1 + 6 * (self.T - 1) + self.P)

    @property
    def log_scales(self) -> slice:
        """The depth prior's per-frame log scales (empty without a prior)."""
        return slice(self.points.stop, None)

    def rotation_column(self, frames, axis: int):
        """Index of component ``axis`` of the rotation of ``frames`` (> 0)."""
        return self.rotations.start + 3 * (frames - 1) + axis

    def translation_column(self, frames, axis: int):
        """Index of component ``axis`` of the translation of ``frames`` (> 0)."""
        return self.translations.start + 3 * (frames - 1) + axis

    def point_column(self, tracks):
        """Index of the inverse depth of ``tracks``."""
        return self.points.start + tracks

    def log_scale_column(self, frames):
        """Index of the depth prior's log scale of ``frames`` (> 0)."""
        return self.log_scales.start + frames - 1


@dataclass
class BundleProblem:
    """Observations of the selected tracks, in the layout the residual function wants."""

    T: int
    W: int
    H: int
    sel: np.ndarray  # [P] index of each selected track among all tracks
    ref: np.ndarray  # [P] reference frame of each track
    ref_xy: np.ndarray  # [P, 2]
    obs_t: np.ndarray  # [M] frame of each observation
    obs_p: np.ndarray  # [M] track of each observation
    obs_xy: np.ndarray  # [M, 2]
    prior_inv: np.ndarray | None = None  # [P] inverse depth of the prior at the reference pixel

    @property
    def layout(self) -> ParamLayout:
        return ParamLayout(self.T, len(self.ref))

    @cached_property
    def observations(self) -> Observations:
        return Observations(self.obs_t, self.ref[self.obs_p], self.ref_xy[self.obs_p], self.W / 2, self.H / 2)


def build_problem(xy, vis, sel, W, H, prior_depth) -> BundleProblem:
    """The problem of tracks ``sel``: each track's first visible frame is its reference, every other
    frame that sees it an observation; with ``prior_depth``, the prior's inverse depth at each reference."""
    T = vis.shape[0]
    v = vis[:, sel]
    ref = v.argmax(0)
    ref_xy = xy[ref, sel].astype(np.float64)
    t_idx, p_idx = np.nonzero(v & (np.arange(T)[:, None] != ref[None]))
    prior = None
    if prior_depth is not None:
        from recon4d.priors.flow import sample

        z = np.array([sample(prior_depth[r][..., None], q[None])[0, 0] for r, q in zip(ref, ref_xy)])
        prior = 1.0 / np.maximum(z, 1e-6)
    return BundleProblem(T, W, H, sel, ref, ref_xy, t_idx, p_idx, xy[t_idx, sel[p_idx]].astype(np.float64), prior)


def track_motion(xy: np.ndarray, vis: np.ndarray) -> np.ndarray:
    """Per track: largest distance from its first visible position (pixels)."""
    first = vis.argmax(0)
    start = xy[first, np.arange(xy.shape[1])]
    d = np.linalg.norm(xy - start, axis=-1)
    return np.where(vis, d, 0).max(0)


def subsample_tracks(idx: np.ndarray, xy, vis, n: int, W: int, H: int,
                     per_frame: int = MIN_BA_TRACKS_PER_FRAME) -> np.ndarray:
    """Up to ``n`` tracks, longest first, at most a few per image cell so all regions count; then, for each
    frame that fewer than ``per_frame`` of them see, more of its own (in the same order) until it has that
    many or has none left.

    Why the second pass: the longest tracks all start early in a camera that pans or travels far, and
    the frames after they end kept none (DAVIS soapbox: 34 of 99 frames under 20 tracks, 0 to 2 in its last
    30, out of 320 to 450 usable); a frame the adjustment barely sees is free to turn anywhere, and the
    translating solves came back with a 38- and a 151-degree turn between two frames, so the rotation-only
    camera was kept for a tracking shot (docs/decisions.md, session 43)."""
    if len(idx) <= n:
        return idx
    length = vis[:, idx].sum(0)
    order = idx[np.argsort(-length, kind="stable")]
    first = vis[:, order].argmax(0)
    p = xy[first, order]
    cells = (p[:, 0] * 8 // W).astype(int) * 8 + (p[:, 1] * 8 // H).astype(int)
    rank = np.zeros(len(order), int)
    seen: dict[int, int] = {}
    for i, c in enumerate(cells):
        rank[i] = seen.get(c, 0)
        seen[c] = rank[i] + 1
    ranked = order[np.lexsort((np.arange(len(order)), rank))]
    chosen = np.arange(len(ranked)) < n
    count = vis[:, ranked[:n]].sum(1)
    for t in np.flatnonzero(count < per_frame):
        extra = np.flatnonzero(~chosen & vis[t, ranked])[: max(per_frame - count[t], 0)]
        chosen[extra] = True
        count += vis[:, ranked[extra]].sum(1)
    return np.sort(ranked[chosen])
