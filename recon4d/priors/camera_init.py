"""Starting poses for the bundle adjustment: pick the motion model, then chain two-view geometry.

Why a model choice first: a camera that only rotates (a pan on a tripod) and a
camera that translates need different initialisations, and each fails on the
other's videos. From rotation alone an essential matrix is undefined (no
baseline), while chaining rotations from homographies with zero translation
starts a dolly or an orbit so far away that the adjustment settles in a wrong
minimum. Worse, the synth scenes are mostly a textured ground plane, for which a
homography also fits a translating camera and a rotation-plus-translation
solution also fits a pan: the adjustment alone cannot tell them apart.

The test (:func:`select_model`) is Torr's GRIC on key-frame pairs with enough
image motion: a homography against a fundamental matrix, each fitted by RANSAC,
scored as robust residual plus a penalty for the model's dimension and number
of parameters. A homography wins on rotation and on planar scenes; a rotation
is told from a plane seen by a moving camera because only K R K^-1 has the
eigenvalues of a rotation (unit modulus after normalising the determinant),
whatever K is, and because it explains the points off the dominant plane as well
as those on it (as many homography inliers as fundamental-matrix inliers). The
video is "rotation" when most pairs say so. Moving objects that cross a pan's
view fail the last test (a pure rotation leaves the fundamental matrix free in
its epipole, and RANSAC fits it to their travel), so the choice also says
whether most homographies passed the others (``homographies_rotate``), and the
solver then weighs a rotation against the translation on the dense flow.

Translation (:func:`essential_chain`): frame 0 and the farthest frame that still
shares enough static tracks give an essential matrix (one chain per robust
estimator in :data:`ESSENTIAL_ESTIMATORS`) and a relative pose (cheirality
test); their common tracks are triangulated, which fixes one scale for the
whole video; every other frame is then placed by PnP (RANSAC,
then Levenberg-Marquardt) against the points triangulated so far, most-covered
frame first, and new tracks are triangulated as frames are added. Resection
against shared points is what keeps the scale consistent from pair to pair.
Both need K, so the field-of-view search runs them once per candidate focal.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from recon4d.geometry import pixels_np


# The essential-matrix estimators (``cv2.findEssentialMat`` methods) whose chains each start a camera solve
# (see recon4d.priors.camera). MAGSAC++ because OpenCV's classic RANSAC stops once its confidence is reached
# and keeps models far off the best: on a synth dolly it returned one with 152 inliers and its rotation 40 deg
# wrong where MAGSAC++ finds 175 inliers and 0.6 deg. Classic RANSAC as well because on DAVIS blackswan (a
# nearly planar scene, little translation) MAGSAC++'s model chains into a camera that barely translates
# (path / depth 0.02 against 0.13) and puts half its points twelve times nearer than the rest; it reprojects
# the tracks as well (0.23 against 0.20 px) but explains the dense flow worse (0.360 against 0.341 px).
ESSENTIAL_ESTIMATORS = {"magsac++": cv2.USAC_MAGSAC, "ransac": cv2.RANSAC}


@dataclass
class ModelChoice:
    kind: str  # rotation | translation
    votes_rotation: int
    pairs: int
    gric_h_minus_f: list  # per pair, per point (negative: the homography is preferred)
    # most pairs' homographies are preferred and look like rotations, whether or not they explain every point
    # the fundamental matrices do (a pan with movers, or a plane seen by a camera that translates a little)
    homographies_rotate: bool = False


def select_model(xy: np.ndarray, vis: np.ndarray, usable: np.ndarray, W: int, min_disp: float = 0.08,
                 max_pairs: int = 8, eig_tol: float = 0.02, inlier_ratio: float = 0.85) -> ModelChoice:
    """Rotation or translation for the whole video (see the module docstring)."""
    T = len(xy)
    votes, rotating, diffs = 0, 0, []
    for i in np.unique(np.linspace(0, T - 2, max_pairs).round().astype(int)):
        j = _partner(xy, vis, usable, i, min_disp * W)
        if j is None:
            continue
        both = vis[i] & vis[j] & usable
        a, b = xy[i, both].astype(np.float64), xy[j, both].astype(np.float64)
        Hm, _ = cv2.findHomography(a, b, cv2.RANSAC, 1.0)
        F, _ = cv2.findFundamentalMat(a, b, cv2.FM_RANSAC, 0.5, 0.999)
        if Hm is None or F is None or F.shape != (3, 3):
            continue
        eF = _sampson(F, a, b)
        eH = _transfer(Hm, a, b) / 2  # symmetric-transfer-like: the error is shared by both images
        sigma = max(0.2, 1.4826 * np.sqrt(np.median(eF)))
        d = (_gric(eH, sigma, 2, 8) - _gric(eF, sigma, 3, 7)) / len(a)
        ev = np.abs(np.linalg.eigvals(Hm / np.cbrt(np.linalg.det(Hm))))
        # a dominant plane seen by a moving camera also prefers H; only a rotation explains the points off it
        thr = (3 * sigma) ** 2
        explains_all = (eH < thr).sum() >= inlier_ratio * (eF < thr).sum()
        rotates = d < 0 and np.abs(ev - 1).max() < eig_tol
        votes += int(rotates and explains_all)
        rotating += int(rotates)
        diffs.append(round(float(d), 3))
    kind = "rotation" if diffs and votes > len(diffs) / 2 else "translation"
    return ModelChoice(kind, votes, len(diffs), diffs, bool(diffs) and rotating > len(diffs) / 2)


def _partner(xy, vis, usable, i: int, min_px: float, min_common: int = 30) -> int | None:
    """First frame after ``i`` whose shared tracks moved ``min_px`` (median); the last one that still
    shares ``min_common`` tracks when none moves that far; None when not even the next frame does."""
    best = None
    for j in range(i + 1, len(xy)):
        both = vis[i] & vis[j] & usable
        if both.sum() < min_common:
            break
        best = j
        if np.median(np.linalg.norm(xy[j, both] - xy[i, both], axis=1)) > min_px:
            break
    return best


def _gric(e2: np.ndarray, sigma: float, d: int, k: int, r: int = 4) -> float:
    """Torr's geometric robust information criterion: data of dimension r = 4 (two image points),
    a model manifold of dimension d with k parameters."""
    n = len(e2)
    return float(np.minimum(e2 / sigma ** 2, 2 * (r - d)).sum() + np.log(r) * d * n + np.log(r * n) * k)


def _sampson(F: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Squared Sampson distance of correspondences a -> b to the fundamental matrix F (b^T F a = 0)."""
    ah = np.concatenate([a, np.ones((len(a), 1))], 1)
    bh = np.concatenate([b, np.ones((len(b), 1))], 1)
    Fa, Ftb = ah @ F.T, bh @ F
    return np.sum(bh * Fa, 1) ** 2 / np.maximum(Fa[:, 0] ** 2 + Fa[:, 1] ** 2 + Ftb[:, 0] ** 2 + Ftb[:, 1] ** 2, 1e-12)


def _transfer(Hm: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    p = np.concatenate([a, np.ones((len(a), 1))], 1) @ Hm.T
    return np.sum((p[:, :2] / p[:, 2:] - b) ** 2, 1)


def rotation_chain(xy: np.ndarray, vis: np.ndarray, usable: np.ndarray, K: np.ndarray) -> np.ndarray:
    """World-to-camera rotations ``[T, 3, 3]`` (frame 0 = identity) from consecutive homographies,
    R = K^-1 H K projected onto SO(3); a frame without enough shared tracks repeats the previous one."""
    Kinv = np.linalg.inv(K)
    R = [np.eye(3)]
    for t in range(1, len(xy)):
        both = vis[t - 1] & vis[t] & usable
        Hm = cv2.findHomography(xy[t - 1, both], xy[t, both], cv2.RANSAC, 1.0)[0] if both.sum() >= 8 else None
        M = Kinv @ Hm @ K if Hm is not None else np.eye(3)
        U, _, Vt = np.linalg.svd(M)
        R.append(U @ np.diag([1, 1, np.sign(np.linalg.det(U @ Vt))]) @ Vt @ R[-1])
    return np.stack(R)


def essential_chain(xy: np.ndarray, vis: np.ndarray, usable: np.ndarray, K: np.ndarray,
                    thresh_px: float = 1.0, min_points: int = 12,
                    estimator: int = cv2.USAC_MAGSAC) -> tuple[np.ndarray, np.ndarray] | None:
    """(viewmats ``[T, 4, 4]`` with frame 0 = identity, world points ``[P, 3]`` NaN where not triangulated)
    for a translating camera, or None when no frame pair gives a usable essential matrix.

    ``estimator``: the robust method of ``cv2.findEssentialMat`` (see :data:`ESSENTIAL_ESTIMATORS`)."""
    T, P = vis.shape
    k = _base_partner(vis, usable)
    if k is None:
        return None
    both = vis[0] & vis[k] & usable
    a, b = xy[0, both].astype(np.float64), xy[k, both].astype(np.float64)
    E, inl = cv2.findEssentialMat(a, b, K, estimator, 0.999, thresh_px)
    if E is None or E.shape != (3, 3):
        return None
    n, R, t, inl = cv2.recoverPose(E, a, b, K, mask=inl)
    if n < min_points:
        return None
    view = np.tile(np.eye(4), (T, 1, 1))
    view[k, :3, :3], view[k, :3, 3] = R, t[:, 0]
    posed = np.zeros(T, bool)
    posed[[0, k]] = True
    points = _triangulate_posed(xy, vis, K, view, posed, usable, thresh_px)
    while not posed.all():
        known = np.isfinite(points).all(1)
        counts = np.where(posed, -1, (vis & known[None]).sum(1))
        t_new = int(np.argmax(counts))
        pose = _resect(points, xy[t_new], vis[t_new] & known, K, view[_nearest(posed, t_new)], min_points)
        view[t_new] = pose if pose is not None else view[_nearest(posed, t_new)]
        posed[t_new] = True
        fresh = _triangulate_posed(xy, vis, K, view, posed, usable & ~known & vis[t_new], thresh_px)
        points = np.where(np.isfinite(points), points, fresh)
    return view, points


def _triangulate_posed(xy, vis, K, view, posed, sel, thresh_px: float) -> np.ndarray:
    """:func:`triangulate` over the posed frames only (the others have no pose yet)."""
    P = xy.shape[1]
    out = np.full((P, 3), np.nan)
    idx = np.flatnonzero(sel)
    if len(idx):
        out[idx] = triangulate(xy[posed][:, idx], vis[posed][:, idx], K, view[posed], np.ones(len(idx), bool),
                               max_err_px=2 * thresh_px, min_angle_deg=0.5)
    return out


def _base_partner(vis: np.ndarray, usable: np.ndarray, min_common: int = 30, keep: float = 0.3) -> int | None:
    """The farthest frame that still shares ``keep`` of frame 0's static tracks (and at least ``min_common``):
    the widest baseline the tracks allow, which conditions the essential matrix best."""
    n0 = (vis[0] & usable).sum()
    common = (vis & vis[0] & usable).sum(1)
    ok = np.flatnonzero((common >= max(min_common, keep * n0)) & (np.arange(len(vis)) > 0))
    return int(ok.max()) if len(ok) else None


def _nearest(posed: np.ndarray, t: int) -> int:
    idx = np.flatnonzero(posed)
    return int(idx[np.argmin(np.abs(idx - t))])


def _resect(points, uv, sel, K, guess, min_points: int) -> np.ndarray | None:
    """Pose of one frame from its 2D-3D matches: PnP in RANSAC, then LM on the inliers."""
    if sel.sum() < min_points:
        return None
    obj, img = points[sel].astype(np.float64), uv[sel].astype(np.float64)
    rvec = cv2.Rodrigues(guess[:3, :3])[0]
    tvec = guess[:3, 3:].copy()
    ok, rvec, tvec, inl = cv2.solvePnPRansac(obj, img, K, None, rvec, tvec, useExtrinsicGuess=True,
                                             iterationsCount=200, reprojectionError=2.0, flags=cv2.SOLVEPNP_ITERATIVE)
    if not ok or inl is None or len(inl) < min_points:
        return None
    rvec, tvec = cv2.solvePnPRefineLM(obj[inl[:, 0]], img[inl[:, 0]], K, None, rvec, tvec)
    pose = np.eye(4)
    pose[:3, :3], pose[:3, 3] = cv2.Rodrigues(rvec)[0], tvec[:, 0]
    return pose


def triangulate(xy: np.ndarray, vis: np.ndarray, K: np.ndarray, viewmats: np.ndarray, sel: np.ndarray,
                max_err_px: float = 2.0, min_angle_deg: float = 1.0) -> np.ndarray:
    """World points ``[P, 3]`` of tracks ``sel`` by linear triangulation over all their visible frames;
    NaN where the rays are nearly parallel (< ``min_angle_deg``) or the reprojection error is high."""
    P = xy.shape[1]
    out = np.full((P, 3), np.nan)
    idx = np.flatnonzero(sel & (vis.sum(0) >= 2))
    if not len(idx):
        return out
    Pm = K @ viewmats[:, :3, :]  # [T, 3, 4]
    v = vis[:, idx].T  # [N, T]
    uv = xy[:, idx].transpose(1, 0, 2)  # [N, T, 2]
    rows = np.concatenate([uv[..., 0:1] * Pm[None, :, 2] - Pm[None, :, 0], uv[..., 1:2] * Pm[None, :, 2] - Pm[None, :, 1]], 1)
    rows = rows * np.concatenate([v, v], 1)[..., None]
    X = np.linalg.svd(rows, full_matrices=False)[2][:, -1]
    X = X[:, :3] / np.where(np.abs(X[:, 3:]) > 1e-12, X[:, 3:], 1e-12)
    cam = np.einsum("tij,nj->nti", viewmats[:, :3, :3], X) + viewmats[None, :, :3, 3]
    proj = pixels_np(cam, K)
    err = np.where(v, np.linalg.norm(proj - uv, axis=-1), 0).max(1)
    front = np.where(v, cam[..., 2] > 0, True).all(1)
    centres = -np.einsum("tji,tj->ti", viewmats[:, :3, :3], viewmats[:, :3, 3])
    rays = X[:, None] - centres[None]
    length = np.linalg.norm(rays, axis=-1, keepdims=True)
    rays /= np.where(length > 0, length, 1.0)
    first, last = v.argmax(1), v.shape[1] - 1 - v[:, ::-1].argmax(1)
    n = np.arange(len(idx))
    # a point on the centre of its first or last camera (a rotation-only chain's, all at the origin) has no ray
    at_centre = (length[n, first, 0] == 0) | (length[n, last, 0] == 0)
    angle = np.degrees(np.arccos(np.clip(np.sum(rays[n, first] * rays[n, last], -1), -1, 1)))
    good = (err < max_err_px) & front & (angle > min_angle_deg) & ~at_centre
    out[idx[good]] = X[good]
    return out
