"""Which of several solved cameras to keep: the one whose rigid flow agrees best with the dense optical flow.

Why not the bundle adjustment's own cost: it sees a few hundred subsampled
tracks, and on a nearly planar scene filmed with little translation (DAVIS
blackswan, DAVIS horsejump-high) the cameras chained from different
essential-matrix estimators reproject them equally well (0.19-0.23 px) while
one of them is far off: its fit ends 1-5 dB lower. The dense flow sees every
pixel. Each candidate camera, with the depth of its own triangulated tracks
interpolated between them (:func:`recon4d.priors.depth.sparse_depth`),
predicts the flow a static scene would show; the median distance from the
observed flow, outside the user's object masks, is its score.
"""

from __future__ import annotations

import numpy as np

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
