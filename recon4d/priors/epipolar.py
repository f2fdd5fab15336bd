"""How far a 2D motion is from what a static point could do between two solved cameras.

Why not only the rigid flow from a depth map: the offline fallback depth is
interpolated between tracks, so away from them (and on every object, whose own
tracks must not feed it) the flow it predicts is wrong by more than an object's
motion. The epipolar geometry of the solved cameras needs no depth. A static
point seen at ``x`` in frame a lands in frame b on the segment from ``y_inf``
(where the camera rotation alone sends it: the point at infinity) towards the
epipole, at a distance that grows with its inverse depth. So the motion
``y - y_inf`` splits into a part across that line (the epipolar distance) and a
part along it that must point away from ``y_inf`` towards the epipole (a point
in front of the camera). The residual is the distance from that segment, in
pixels of frame b, less a share of the parallax (the camera's direction of travel
and the flow are only so exact). For a camera that only rotates the segment collapses to
``y_inf``, and the whole displacement from it is the residual. The segment
ends where the nearest static point the tracks know of (with a margin) would
land, so an object that runs along the line faster than any static point could
is caught as well.
"""

from __future__ import annotations

import numpy as np


def relative(view_a: np.ndarray, view_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, t) taking camera-a coordinates to camera-b coordinates."""
    rel = view_b @ np.linalg.inv(view_a)
    return rel[:3, :3], rel[:3, 3]


def static_residual(x: np.ndarray, y: np.ndarray, K: np.ndarray, view_a: np.ndarray, view_b: np.ndarray,
                    max_inv_depth: float = np.inf, parallax_tol: float = 0.0) -> np.ndarray:
    """Distance ``[N]`` (px, frame b) of each ``y`` from where a static point seen at ``x`` in frame a can
    land: the segment of inverse depths ``[0, max_inv_depth]`` (a half-line when unbounded, a single point
    when the cameras share a centre), less ``parallax_tol`` times the parallax of the segment's point nearest
    to ``y`` (its distance from the point at infinity).

    Why forgive a share of the parallax: the flow's error grows with the displacement it measures (blur,
    large motions), and so does the error a slightly wrong direction of travel gives an epipolar line away
    from the epipole. Without it the near floor of a camera moving forwards, the fastest static pixels,
    was flagged as an object in most frames of a synth dolly."""
    R, t = relative(view_a, view_b)
    h = np.concatenate([x, np.ones((len(x), 1))], 1) @ (K @ R @ np.linalg.inv(K)).T
    k = K @ t
    a = h[:, :2] / _positive(h[:, 2:])
    if not np.isfinite(max_inv_depth):
        g = k[:2][None] * h[:, 2:] - h[:, :2] * k[2]  # direction in which growing inverse depth moves the point
        end = a + 1e6 * g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-12)
    else:
        den = h[:, 2:] + max_inv_depth * k[2]
        end = np.where(den > 1e-9, (h[:, :2] + max_inv_depth * k[:2]) / _positive(den), a + 1e6 * (k[:2] - a * k[2]))
    d = end - a
    s = np.clip(np.sum((y - a) * d, 1) / np.maximum(np.sum(d * d, 1), 1e-18), 0, 1)
    residual = np.linalg.norm(y - a - s[:, None] * d, axis=1)
    if parallax_tol > 0:
        residual = np.maximum(residual - parallax_tol * s * np.linalg.norm(d, axis=1), 0.0)
    return residual


def _positive(z: np.ndarray) -> np.ndarray:
    return np.where(np.abs(z) > 1e-9, z, 1e-9)


def max_inverse_depth(points: np.ndarray, viewmats: np.ndarray, vis: np.ndarray, q: float = 99.0,
                      margin: float = 1.5) -> np.ndarray:
    """``[T]``: per frame, the largest inverse depth a static point plausibly has (``margin`` times the
    ``q``-th percentile over the triangulated points seen there); inf where no point is known."""
    ok = np.isfinite(points).all(1)
    out = np.full(len(viewmats), np.inf)
    for t, v in enumerate(viewmats):
        sel = ok & vis[t]
        if sel.sum() >= 10:
            z = points[sel] @ v[2, :3] + v[2, 3]
            z = z[z > 1e-9]
            if len(z) >= 10:
                out[t] = margin * np.percentile(1 / z, q)
    return out
