"""Which camera to keep: the choices between solves that :class:`~recon4d.priors.camera.CameraSolver` makes.

Why apart from the solver: the solver produces candidate cameras (per motion model, per essential-matrix
start, per field of view); these rules pick among them, and each rests on measurements of its own (the
default field of view where the tracks cannot rule it out and the judge does not clearly prefer the focal
freed, the rotation-only camera where it explains the video about as well as a translating one, the first
candidate that is believable at all).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from recon4d.geometry import pixels_np, points_in_cameras
from recon4d.priors.camera_sanity import implausibility
from recon4d.priors.parallel import map_single_threaded

if TYPE_CHECKING:
    from recon4d.priors.camera import CameraResult

DEFAULT_FOV_DEG = 55.0  # used when the focal cannot be observed (a still camera, a flat FoV search) and none is given
# An unobserved focal (no sharp minimum) is held at the default where the search's cost there is within this
# factor of its lowest: the tracks cannot rule the default out. Above it the search's lowest point stands.
DEFAULT_FOV_RISE = 1.5
# Where the focal is held at the default, the camera refined with the focal free is kept instead when the judge
# scores it at least this many times lower: a flat search's lowest point is noise, so a small gain is too.
FREE_FOCAL_MARGIN = 2.0
# Of the two motion models' solves the rotation-only camera is kept when the judge scores it within this factor
# of the translating one (``rotation_if_as_good``).
ROTATION_TOLERANCE = 2.0


def default_fov_fits(search: dict) -> bool:
    """Whether a FoV search (FoV -> cost) cannot rule out ``DEFAULT_FOV_DEG``: its cost there, interpolated
    linearly, is within ``DEFAULT_FOV_RISE`` of its lowest."""
    fovs = sorted(search)
    return float(np.interp(DEFAULT_FOV_DEG, fovs, [search[f] for f in fovs])) <= DEFAULT_FOV_RISE * min(search.values())


def sharp_minimum(search: dict, contrast: float) -> bool:
    """True when the best FoV's cost is clearly below its neighbours' (by ``contrast``, relative): a flat
    cost means the tracks cannot tell focal lengths apart (pure translation, a camera fixating a point)."""
    fovs = sorted(search)
    i = min(range(len(fovs)), key=lambda k: search[fovs[k]])
    best = search[fovs[i]]
    nbrs = [search[fovs[k]] for k in (i - 1, i + 1) if 0 <= k < len(fovs)]
    return bool(nbrs) and min(nbrs) > (1 + contrast) * best


def judged_order(solved: dict[str, CameraResult], judge: Callable[[CameraResult], float]) -> list[CameraResult]:
    """The cameras ``solved`` (start name -> camera) in the order the ``judge`` prefers them, lowest score
    first, where a camera refined with a freed focal (``info["focal_freed"]``) counts ``FREE_FOCAL_MARGIN``
    times its score: held at the default, the focal is a guess the tracks could not rule out, and only a
    clear gain on the dense flow rules it out (DAVIS libby: 0.56 held at 55 degrees, 0.11 freed at 58).
    Every camera's info gets all the scores (``start_scores``) and its own (``judge_score``); the cameras are
    judged side by side (each judgement is independent)."""
    scores = dict(zip(solved, map_single_threaded(lambda cam: float(judge(cam)), solved.values())))
    for name, cam in solved.items():
        cam.info["start_scores"] = scores
        cam.info["judge_score"] = scores[name]
    ranked = {name: scores[name] * (FREE_FOCAL_MARGIN if cam.info.get("focal_freed") else 1.0)
              for name, cam in solved.items()}
    return [solved[name] for name in sorted(ranked, key=ranked.get)]


def rotation_if_as_good(moving: CameraResult, rotating: CameraResult | None,
                         judge: Callable[[CameraResult], float]) -> CameraResult:
    """The rotation-only camera where the ``judge`` scores it within ``ROTATION_TOLERANCE`` of the translating one.

    Why: a pan whose moving objects cross the view loses the model vote (:func:`select_model`): the
    fundamental matrix of a pure rotation is free in its epipole, RANSAC sets it along the movers' travel,
    and their tracks join its inliers, so the homography seems to leave points unexplained. The translating
    camera solved instead then hides exactly that travel from the epipolar mask test, and the movers are
    never found (synth pan pairs from video: 12 of 20 scenes). Judged on the dense flow and every track, the
    rotation explains a pan about as well as the translation, which fits the movers with its extra freedom,
    and a translating camera far worse (docs/decisions.md, session 37). Where the vote said rotation, a
    camera that travels is scored 2.2 to 7 times worse as a rotation (DAVIS bear, car-roundabout,
    scooter-black, breakdance-flare), a synth pan at most 1.4 times (session 39). The scores go to the info.
    The solver also weighs the rotation where the translating camera's path is short
    (``CameraOptions.weigh_rotation_baseline``): where movers hold many of the tracks, most homographies fail
    the vote's tests too, and the translation solve bends a pan into a camera travelling 1-5 % of the scene
    depth (synth pans from video) whose epipolar test lets the movers pass as background (what it does to
    DAVIS: docs/decisions.md, session 49). The translating camera's path goes to the info.
    """
    if rotating is None:
        return moving
    scores = [rotating.info.get("judge_score") or float(judge(rotating)),
              moving.info.get("judge_score") or float(judge(moving))]
    chosen = rotating if scores[0] <= ROTATION_TOLERANCE * scores[1] else moving
    chosen.info["rotation_against_translation"] = scores
    chosen.info["translation_baseline_over_depth"] = moving.info.get("baseline_over_depth")
    return chosen


def first_plausible(cams: list[CameraResult], xy: np.ndarray, vis: np.ndarray,
                     rejected: list[str]) -> CameraResult | None:
    """The first of ``cams`` that :func:`~recon4d.priors.camera_sanity.implausibility` accepts; the
    reasons of those it refuses go to ``rejected``."""
    for cam in cams:
        why = implausibility(cam, xy, vis)
        if why is None:
            return cam
        rejected.append(f"{cam.motion_type} camera: {why}")
    return None


def image_motion_px(cam: CameraResult) -> float:
    """How far camera ``cam`` moves its own static points in the image: per frame, the median over its
    triangulated points (those in front of that camera) of their shift from where frame 0 sees them; the
    largest over the frames. ``inf`` where it has no points to tell by.

    Why the points and not the tracks: the solver's still test (``CameraOptions.static_px``) reads the median
    motion of every candidate track, and where moving objects hold most of the tracks it is their motion
    (synth follow pairs: the tracks move 1.2-1.4 px, the background under 0.05). The adjustment then fits
    a camera to the background it keeps, and such a camera barely moves: 0.02-0.04 px here, against 14 px
    and more for a synth dolly. Its focal and poses are noise (a 19-degree FoV for a 60-degree camera)."""
    points = cam.points[cam.static & np.isfinite(cam.points).all(1)]
    if len(points) == 0:
        return float("inf")
    in_cam = points_in_cameras(cam.viewmats, points)
    front = in_cam[..., 2] > 1e-6
    uv = pixels_np(in_cam, cam.K)
    shift = np.where(front & front[:1], np.linalg.norm(uv - uv[:1], axis=-1), np.nan)
    seen = np.isfinite(shift).any(1)
    return float(np.nanmedian(shift[seen], axis=1).max()) if seen.any() else float("inf")
