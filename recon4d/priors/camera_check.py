"""Which of several solved cameras to keep: the one whose rigid flow agrees best with the dense optical flow
and which reprojects the static tracks best (:func:`camera_score`, their product).

Why not the bundle adjustment's own cost: it sees a few hundred subsampled
tracks, and on a nearly planar scene filmed with little translation (DAVIS
blackswan, DAVIS horsejump-high) the cameras chained from different
essential-matrix estimators reproject them equally well (0.19-0.23 px) while
one of them is far off: its fit ends 1-5 dB lower. The dense flow sees every
pixel. Each candidate camera, with the depth of its own triangulated tracks
interpolated between them (:func:`recon4d.priors.depth.sparse_depth`),
predicts the flow a static scene would show; the median distance from the
observed flow, outside the user's object masks, is its score.

Why not the flow alone: its depth is interpolated between tracks, so away from
them most of its disagreement is the depth's, shared by every candidate, and
the camera's own part can drown in it. On a synth orbit (320x240, its true
depth as the prior) the two candidates' flow scores differ by 0.8% while one
is 1.03 degrees off and the other 0.17. What tells them apart there is how
well each reprojects every static track, each triangulated under it
(:func:`track_reprojection`: 0.190 against 0.152 px). The score is the
product of the two: scale free, so a candidate wins on one only by more than
it loses on the other. On the 11 DAVIS clips whose quick fits solve a
translating camera (first 16 frames), the product keeps the flow's choice on
nine and changes it on two of its near-ties (< 0.2%): parkour 0.4 dB better, elephant 1.6 dB worse (a camera
that barely translates, where both candidates are nearly the same pan). The
bundle adjustment's own median is no substitute for the track term: each
candidate's is over its own inliers, and judging by it costs bus 2.9 dB.
"""

from __future__ import annotations

import numpy as np

from recon4d.geometry import camera_centres, lift_np, pixels_np, points_in_cameras
from recon4d.priors.camera_init import triangulate
from recon4d.priors.depth import sparse_depth
from recon4d.priors.masks import rigid_flow


def flow_disagreement(cam, xy: np.ndarray, vis: np.ndarray, static: np.ndarray, fwd: np.ndarray,
                      ignore: np.ndarray | None = None) -> float:
    """Median px between the forward flow ``fwd [T-1, H, W, 2]`` and the flow camera ``cam`` (a
    :class:`~recon4d.priors.camera.CameraResult`) induces with the depth of the tracks ``static [P]``
    triangulated under it; pixels where ``ignore [T, H, W]`` is set (moving objects) are left out."""
    T, H, W = fwd.shape[0] + 1, *fwd.shape[1:3]
    points = np.where(np.isfinite(cam.points), cam.points, triangulate(xy, vis, cam.K, cam.viewmats, static))
    depth = sparse_depth((T, H, W), cam.viewmats, points, xy, vis)
    errors = []
    for t in range(T - 1):
        err = np.linalg.norm(rigid_flow(depth[t], cam.K, cam.viewmats[t], cam.viewmats[t + 1]) - fwd[t], axis=-1)
        errors.append(err[~ignore[t]] if ignore is not None else err.ravel())
    return float(np.median(np.concatenate(errors)))


def track_reprojection(cam, xy: np.ndarray, vis: np.ndarray, static: np.ndarray, behind_px: float = 10.0) -> float:
    """Median over the tracks ``static [P]`` seen in 3 frames or more of their mean reprojection error (px)
    when triangulated under camera ``cam``, without the bundle adjustment's outlier filter, so that every
    candidate is judged on the same tracks; a track it puts behind a camera counts ``behind_px``.

    A camera that only rotates (its centre never moves) sees each static point along one ray, whatever its
    depth, and triangulating without a baseline puts points anywhere (10-94 px on synth pans and DAVIS clips):
    there a track's point is taken one unit along the mean of its rays, so the error is their spread."""
    sel = static & (vis.sum(0) >= 3)
    centres = camera_centres(cam.viewmats)
    if np.allclose(centres, centres[0], rtol=0.0, atol=1e-9):
        points = centres[0] + _mean_rays(xy[:, sel], vis[:, sel], cam.K, cam.viewmats)
    else:
        points = triangulate(xy, vis, cam.K, cam.viewmats, sel, max_err_px=np.inf, min_angle_deg=0.0)[sel]
    in_cam = points_in_cameras(cam.viewmats, points)
    uv = pixels_np(in_cam, cam.K)
    seen = vis[:, sel]
    err = np.where(seen, np.linalg.norm(uv - xy[:, sel], axis=-1), 0).sum(0) / seen.sum(0)
    return float(np.median(np.where(np.isfinite(points).all(1), err, behind_px)))


def camera_score(cam, xy: np.ndarray, vis: np.ndarray, static: np.ndarray, fwd: np.ndarray,
                 ignore: np.ndarray | None = None) -> float:
    """The judge of :meth:`recon4d.priors.camera.CameraSolver.solve` (lower is better): the
    :func:`flow_disagreement` of ``cam`` times its :func:`track_reprojection` (see the module docstring)."""
    return flow_disagreement(cam, xy, vis, static, fwd, ignore) * track_reprojection(cam, xy, vis, static)


def _mean_rays(xy: np.ndarray, vis: np.ndarray, K: np.ndarray, viewmats: np.ndarray) -> np.ndarray:
    """Unit world direction ``[P, 3]`` of each track ``xy [T, P, 2]``: the mean of its rays over the frames
    ``vis [T, P]`` that see it (each ray lifted at unit depth, less the camera's centre)."""
    centres = camera_centres(viewmats)
    ones = np.ones(xy.shape[1])
    rays = np.stack([lift_np(xy[t], ones, K, viewmats[t]) - centres[t] for t in range(len(xy))])
    mean = np.where(vis[..., None], rays / np.linalg.norm(rays, axis=-1, keepdims=True), 0.0).sum(0)
    return mean / np.maximum(np.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)
