"""Whether a solved camera is believable from what its own tracks did: the guard between the bundle
adjustment and every step that trusts its poses.

Why: a bundle adjustment can end far from any sensible camera while its robust cost still looks
small. A rotation-only adjustment can even land on a mirror solution: on DAVIS paragliding the
cameras from frame 61 on were turned 179 deg with every point behind them, reprojecting to 0.34 px
(the projection x/z does not see the sign of z), and the depth step then crashed on frames with no
point in front. Two checks that need no ground truth catch such a camera:

* **Rotation against image motion.** Turning a camera by an angle moves every image point by at
  least about ``f * tan(angle)`` pixels at the centre, and a roll moves points at the edge by
  about their radius times the angle. So a frame-to-frame rotation several times larger than
  the angle its tracks' image motion allows (``ROTATION_SLACK``, plus ``ROTATION_MARGIN_DEG``)
  is not what the video shows. The margin is wide on purpose: this refuses absurd cameras, not
  slightly wrong frames (DAVIS bear's pan camera turns 2.5 deg at frame 66 where its tracks move
  1.5 px, about 0.1 deg; the photometric cameras stage is what corrects such a frame).
* **Points in front.** The static points the camera triangulated must lie in front of the
  cameras that see them, in every frame (``MIN_IN_FRONT`` of them); a camera that sees most of
  its own points behind it has flipped.

The solver tries the next candidate (the other essential-matrix start, then the other motion
model) when one fails, and says the camera could not be solved when every one does.
"""

from __future__ import annotations

from itertools import groupby

import numpy as np

ROTATION_SLACK = 3.0
ROTATION_MARGIN_DEG = 5.0
MIN_IN_FRONT = 0.5
MIN_SHARED = 8  # static tracks two consecutive frames must share for the camera to be followed from one to the next


def frame_rotations_deg(viewmats: np.ndarray) -> np.ndarray:
    """``[T-1]`` angle of the rotation between consecutive cameras (degrees, 0 to 180)."""
    R = viewmats[:, :3, :3]
    rel = R[1:] @ np.transpose(R[:-1], (0, 2, 1))
    cos = (np.trace(rel, axis1=1, axis2=2) - 1) / 2
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def allowed_rotations_deg(xy: np.ndarray, vis: np.ndarray, focal: float) -> np.ndarray:
    """``[T-1]`` largest believable rotation between consecutive frames, from the 90th percentile of
    the image motion of the tracks seen in both (the whole clip's where a pair shares fewer than
    ``MIN_SHARED``)."""
    both = vis[1:] & vis[:-1]
    step = np.linalg.norm(xy[1:] - xy[:-1], axis=-1)
    clip_wide = np.percentile(step[both], 90) if both.any() else 0.0
    moved = np.array([np.percentile(s[b], 90) if b.sum() >= MIN_SHARED else clip_wide for s, b in zip(step, both)])
    return ROTATION_SLACK * np.degrees(np.arctan(moved / focal)) + ROTATION_MARGIN_DEG


def implausibility(cam, xy: np.ndarray, vis: np.ndarray) -> str | None:
    """Why camera ``cam`` (a :class:`~recon4d.priors.camera.CameraResult`) cannot be what the tracks
    ``xy [T, P, 2]``, ``vis [T, P]`` saw, or None when it passes every check."""
    if not (np.isfinite(cam.K).all() and np.isfinite(cam.viewmats).all()):
        return "non-finite intrinsics or poses"
    if len(cam.viewmats) > 1:
        turn, allowed = frame_rotations_deg(cam.viewmats), allowed_rotations_deg(xy, vis, float(cam.K[0, 0]))
        worst = int(np.argmax(turn - allowed))
        if turn[worst] > allowed[worst]:
            return (f"frames {worst}-{worst + 1} turn {turn[worst]:.1f} deg where their tracks' motion allows "
                    f"at most {allowed[worst]:.1f}")
    known = np.isfinite(cam.points).all(1)
    if cam.motion_type == "static" or not known.any():
        return None
    for t, view in enumerate(cam.viewmats):
        seen = known & vis[t]
        if seen.sum() < 8:
            continue
        z = cam.points[seen] @ view[2, :3] + view[2, 3]
        if (z > 0).mean() < MIN_IN_FRONT:
            return f"frame {t} sees {100 * (z <= 0).mean():.0f}% of its triangulated points behind it"
    return None


def untracked_gaps(vis: np.ndarray, static: np.ndarray) -> list[tuple[int, int]]:
    """``(first, last)`` frame of each run over which consecutive frames share fewer than ``MIN_SHARED``
    of the ``static [P]`` tracks: nothing seen there stands still (sky, water, or masked objects fill
    the view), so no solve can tell how the camera turned between ``first`` and ``last``."""
    unlinked = (vis[1:] & vis[:-1] & static).sum(1) < MIN_SHARED  # per pair (t, t + 1)
    runs = [[t for t, _ in run] for gap, run in groupby(enumerate(unlinked), key=lambda p: p[1]) if gap]
    return [(run[0], run[-1] + 1) for run in runs]


def gap_note(vis: np.ndarray, static: np.ndarray) -> str | None:
    """What a failed camera solve should say about ``untracked_gaps``, or None when there are none."""
    gaps = untracked_gaps(vis, static)
    if not gaps:
        return None
    spans = ", ".join(f"{a}-{b}" for a, b in gaps)
    return (f"frames {spans} share fewer than {MIN_SHARED} still tracks from one frame to the next (sky, water "
            f"or the masked objects fill them), so nothing links the camera across them: fit the frames before "
            f"or after with --start/--end")
