"""Shape words (ball, cube, cylinder) from an object's silhouettes in the input's instance id masks.

Why the masks and not the fit: the fitted Gaussians are too rough in 3D for a
shape test (a flat-face test put a cylinder above every cube and a spinning ball
among them), and rendering an object's own Gaussians to an alpha silhouette
fails exactly where shape matters: a fit explains a spinning, evenly coloured
object partly with static Gaussians, so its rendered silhouette is full of holes
(a spinning ball fills 0.65 of its enclosing circle, its mask 0.91). The id
masks are part of the input (a ``recon4d synth`` scene ships them as its
segmentation input, DAVIS has ``Annotations/``), not ground truth; the cameras
and the up direction come from the fit's priors.

How: a frame counts when the object's mask is whole: off the image border, and
touching no object nearer to the camera than itself. Its mask is warped into a
virtual camera that looks straight at the object with world up pointing up the
image (this undoes the wide-angle stretch away from the image centre and any
camera roll), zoomed so that the object spans about a hundred pixels, and
smoothed (a 15-pixel mask would otherwise be all staircase). The silhouette is
then described by

* solidity: its area over its convex hull's; the three shapes are convex bodies;
* roundness: its area over the area of its minimum enclosing circle;
* aspect: height over width as seen; a ball's is about 1;
* the object's height over width: the aspect less the share the top face adds
  when seen from elevation e, ``(aspect - sin e) / cos e``; exact for a cube and an
  upright cylinder, whose footprints are as deep as they are wide. A cube is
  never taller than wide.

Each such frame votes for a shape, or abstains when its numbers fall between
the bands. The bands come from 40 ``recon4d synth`` scenes (120 objects, about
2300 frames seen whole; 1st-99th percentile per frame; splatted edges make every
shape read squatter than it is):

* roundness 0.84-0.92 for balls, 0.69-0.79 for cubes, 0.72-0.82 for cylinders;
* aspect 0.86-0.99 for balls; cylinders as round as a ball are 1.12 or more;
* height over width 0.55-0.77 for balls, 0.52-0.76 for cubes, 0.80-1.03 for
  cylinders: a cylinder is taller than a ball or a cube can be, so it need
  only be less round than a ball; a cube is as squat as a ball, so roundness
  alone parts them and a cube must keep clear of the ball's band.

With these bands 1 frame in 2300 voted for a wrong shape, so one whole frame is
enough; where there are more, a shape needs the votes of two thirds of them.
Otherwise the shape is unknown (None) and the answerer says it cannot tell.
Silhouettes outside every band are unknown too (DAVIS' horse and rider:
solidity 0.4-0.7). On 33 other synth scenes (99 objects, about 1800 frames; 1
wrong vote) no object got a wrong shape and 13 none, 12 of them never seen whole.

Only a ball is named without the world's up direction (``pitch_known`` false: no
ground plane in the fit, so up is the first camera's): its bands read no
elevation, while a cube seen from 20 degrees above is as tall as a cylinder seen
level (a synth static-camera scene fitted from its video alone named its cube a
cylinder in every frame).
"""

from __future__ import annotations

import math

import cv2
import numpy as np

SHAPES = ("ball", "cube", "cylinder")  # what the silhouette test can name
PATCH = 128  # side of the virtual camera's image, pixels
SPAN = 0.8  # share of the patch the object's mask spans
MIN_PIXELS = 40  # smaller masks are too coarse to describe
AGREE = 2 / 3  # share of the frames showing the object whole that must vote for its shape
SOLID = 0.93  # area over convex hull area: below, not a convex body
BALL_ROUND, BOX_ROUND = 0.82, 0.80  # roundness: a ball at or above the first, a cube at or below the second
BALL_ASPECT = (0.8, 1.06)  # a ball's silhouette is about as tall as wide (round cylinders read 1.12 or more)
CUBE_TALL, CYLINDER_TALL = (0.45, 0.77), (0.81, 1.2)  # height over width bands


def whole_frames(masks: np.ndarray, mask_id: int, depths: dict[int, np.ndarray], behind_ok: bool = False) -> list[int]:
    """Frames in which the object's mask is whole: inside the image and not behind a touching object.

    ``depths`` maps mask ids to their camera depth per frame; an id without a
    depth counts as nearer (it may hide part of the object). ``behind_ok`` keeps
    the frames where a nearer object touches it (inside the image is all it asks).
    """
    keep = []
    for t in range(len(masks)):
        obj = masks[t] == mask_id
        if obj.sum() < MIN_PIXELS or obj[0].any() or obj[-1].any() or obj[:, 0].any() or obj[:, -1].any():
            continue
        ring = cv2.dilate(obj.astype(np.uint8), np.ones((3, 3), np.uint8)).astype(bool) & ~obj
        touching = [int(i) for i in np.unique(masks[t][ring]) if i not in (0, mask_id)]
        if behind_ok or all(i in depths and depths[i][t] > depths[mask_id][t] for i in touching):
            keep.append(t)
    return keep


def straight_on(mask: np.ndarray, K: np.ndarray, viewmat: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, float]:
    """The mask seen by a virtual camera looking straight at the object, world up = image up.

    Returns the binary ``[PATCH, PATCH]`` silhouette and the elevation (radians) of
    the line of sight: how steeply the camera looks down on the object.
    """
    ys, xs = np.nonzero(mask)
    z = np.linalg.solve(K, [xs.mean() + 0.5, ys.mean() + 0.5, 1.0])
    z /= np.linalg.norm(z)
    up_cam = viewmat[:3, :3] @ up
    y = -(up_cam - (up_cam @ z) * z)
    y /= np.linalg.norm(y)
    rot = np.stack([np.cross(y, z), y, z])  # camera -> virtual camera
    zoom = SPAN * PATCH / (max(np.ptp(xs), np.ptp(ys)) + 1.0)
    f = K[0, 0] * zoom
    Kv = np.array([[f, 0.0, PATCH / 2], [0.0, f, PATCH / 2], [0.0, 0.0, 1.0]])  # square pixels
    half = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.0, 0.0, 1.0]])  # pixel corners -> centres
    homography = np.linalg.inv(half) @ Kv @ rot @ np.linalg.inv(K) @ half
    warped = cv2.warpPerspective(mask.astype(np.float32), homography, (PATCH, PATCH), flags=cv2.INTER_LINEAR)
    warped = cv2.GaussianBlur(warped, (0, 0), max(0.5 * zoom, 0.5))
    return (warped > 0.5).astype(np.uint8), math.asin(float(np.clip(-(z @ up_cam), -1.0, 1.0)))


def describe_silhouette(silhouette: np.ndarray, elevation: float) -> dict[str, float]:
    """Solidity, roundness, aspect (height over width as seen) and the object's height over width."""
    contours, _ = cv2.findContours(silhouette, cv2.RETR_EXTERNAL, cv2.CHAIN_APPROX_NONE)
    c = max(contours, key=cv2.contourArea)
    area = cv2.contourArea(c)
    _, radius = cv2.minEnclosingCircle(c)
    _, _, w, h = cv2.boundingRect(c)
    return {
        "solid": area / max(cv2.contourArea(cv2.convexHull(c)), 1e-9),
        "round": area / (math.pi * radius**2),
        "aspect": h / w,
        "tall": (h / w - math.sin(elevation)) / math.cos(elevation),
    }


def vote(numbers: dict[str, float]) -> str | None:
    """The shape one frame's silhouette numbers name, or None between the bands."""
    if numbers["solid"] < SOLID:
        return None
    if numbers["round"] >= BALL_ROUND:
        return "ball" if BALL_ASPECT[0] <= numbers["aspect"] <= BALL_ASPECT[1] else None
    if numbers["round"] <= BOX_ROUND and CUBE_TALL[0] <= numbers["tall"] <= CUBE_TALL[1]:
        return "cube"
    if CYLINDER_TALL[0] <= numbers["tall"] <= CYLINDER_TALL[1]:  # too tall for a ball, so less round will do
        return "cylinder"
    return None


def nameable(pitch_known: bool) -> tuple[str, ...]:
    """The shapes the silhouette test can name: a ball's bands read no elevation, a cube's and a cylinder's do."""
    return SHAPES if pitch_known else ("ball",)


def estimate_shape(masks: np.ndarray, mask_id: int, K: np.ndarray, viewmats: np.ndarray, up: np.ndarray,
                   depths: dict[int, np.ndarray], pitch_known: bool = True) -> tuple[str | None, str]:
    """Shape word of the object with ``mask_id`` in id masks ``[T, H, W]`` (None when unsure) and why.

    ``K`` is for the masks' resolution, ``viewmats`` ``[T, 4, 4]`` world-to-camera,
    ``up`` the world's unit up vector, ``depths`` camera depth per frame of each mask id;
    ``pitch_known`` false: ``up`` is a guess, so only a ball can be named.
    """
    frames = whole_frames(masks, mask_id, depths)
    votes = [vote(describe_silhouette(*straight_on(masks[t] == mask_id, K, viewmats[t], up))) for t in frames]
    if not votes:
        return None, "no frame shows it whole (always at the image border or touching a nearer object)"
    tally = {s: votes.count(s) for s in SHAPES}
    best = max(tally, key=tally.get)
    counts = ", ".join(f"{s} {n}" for s, n in tally.items() if n) or "none"
    if tally[best] < AGREE * len(votes):
        return None, f"votes of {len(votes)} frames: {counts}; no shape has two thirds"
    if best not in nameable(pitch_known):
        return None, f"votes of {len(votes)} frames: {counts}; but the camera's pitch is unknown (no ground plane)"
    return best, f"votes of {len(votes)} frames: {counts}"
