"""Geometric rules about the camera's own motion and about two objects at once: the counterparts of
``recon4d.grounding.rules`` (one object's motion) for "is the camera moving towards the dog", "are the
two cars going the same way", "which one leads". Apart because they read the scene's cameras and pairs of
tracks rather than one object's ``Motion``; the same ``(label, why)`` contract, None when unsure.
"""

from __future__ import annotations

import math
from itertools import pairwise

import numpy as np

from recon4d.geometry import camera_centres
from recon4d.grounding.objects import CAMERA_STILL
from recon4d.grounding.rules import DOMINANCE
from recon4d.grounding.trajectories import NOT_ROTATING_DEG, ROTATING_DEG, ObjectTrack, SceneTracks


def camera_move(st: SceneTracks, target: ObjectTrack | None, offered: set[str]) -> tuple[str | None, str]:
    """The camera's own travel: towards / away from the named object (or along its view), left / right, up / down."""
    eyes = camera_centres(st.viewmats)
    steps = np.diff(eyes, axis=0)
    scene = [tr.centres for tr in ([target] if target else st.tracks)]
    if not scene:
        return None, "no object to measure the camera's travel against"
    centres = np.mean(scene, axis=0)
    far = float(np.median(np.linalg.norm(centres - eyes, axis=1)))
    path = float(np.linalg.norm(steps, axis=1).sum())
    if path < CAMERA_STILL * far:
        return "not moving", f"camera path {path:.2f} against distance {far:.2f}"
    in_cam = np.einsum("tij,tj->ti", st.viewmats[:-1, :3, :3], steps).sum(0)
    to_obj = centres[:-1] - eyes[:-1]
    to_obj /= np.linalg.norm(to_obj, axis=1, keepdims=True)
    forward = float((steps * to_obj).sum())
    axes = {"depth": (forward, "towards", "away"), "lateral": (float(in_cam[0]), "right", "left"),
            "rise": (float(-in_cam[1]), "up", "down")}
    asked = [n for n, (_, pos, neg) in axes.items() if pos in offered or neg in offered] or ["depth"]
    best = max(asked, key=lambda n: abs(axes[n][0]))
    others = max(abs(v) for n, (v, *_) in axes.items() if n != best)
    v, pos, neg = axes[best]
    if abs(v) < DOMINANCE * others:
        return None, f"camera {best} {v:+.2f} does not dominate (next {others:.2f})"
    return (pos if v > 0 else neg), f"camera {best} {v:+.2f} of path {path:.2f}"


def camera_turn(st: SceneTracks) -> tuple[str | None, str]:
    """Which way the camera turned: its viewing axis's change of heading about up (left/right) or elevation (up/down)."""
    f0, f1 = st.viewmats[0, 2, :3], st.viewmats[-1, 2, :3]
    up = st.up
    h0, h1 = f0 - (f0 @ up) * up, f1 - (f1 @ up) * up
    yaw = math.degrees(math.atan2(float(np.cross(h0, h1) @ up), float(h0 @ h1)))
    pitch = math.degrees(math.asin(float(np.clip(f1 @ up, -1, 1))) - math.asin(float(np.clip(f0 @ up, -1, 1))))
    if max(abs(yaw), abs(pitch)) < NOT_ROTATING_DEG:
        return "not turning", f"yaw {yaw:+.1f}, pitch {pitch:+.1f} deg"
    if max(abs(yaw), abs(pitch)) < DOMINANCE * min(abs(yaw), abs(pitch)):
        return None, f"yaw {yaw:+.1f} and pitch {pitch:+.1f} deg: neither dominates"
    if abs(yaw) > abs(pitch):
        return ("left" if yaw > 0 else "right"), f"camera yaw {yaw:+.1f} deg"
    return ("up" if pitch > 0 else "down"), f"camera pitch {pitch:+.1f} deg"


def camera_orbit(st: SceneTracks, target: ObjectTrack) -> tuple[str | None, str]:
    """Clockwise / counter-clockwise (seen from above) sense of the camera's travel around an object."""
    rel = camera_centres(st.viewmats) - target.centres
    rel -= (rel @ st.up)[:, None] * st.up
    angles = [math.atan2(float(np.cross(a, b) @ st.up), float(a @ b)) for a, b in pairwise(rel)]
    total = math.degrees(sum(angles))
    if abs(total) < NOT_ROTATING_DEG:
        return "not rotating", f"camera goes {total:+.1f} deg round the object"
    if abs(total) < ROTATING_DEG:
        return None, f"camera goes {total:+.1f} deg round the object: in the uncertain band"
    return ("counter-clockwise" if total > 0 else "clockwise"), f"camera goes {total:+.1f} deg round the object"


def pair_heading(a: ObjectTrack, b: ObjectTrack, up: np.ndarray) -> tuple[str | None, str]:
    """Same or opposite direction: the angle between two moving objects' net horizontal travel."""
    if not (a.motion.moving and b.motion.moving):
        return "not moving", "both must move"
    va, vb = (t.centres[-1] - t.centres[0] for t in (a, b))
    va, vb = va - (va @ up) * up, vb - (vb @ up) * up
    angle = math.degrees(math.acos(float(np.clip(va @ vb / max(np.linalg.norm(va) * np.linalg.norm(vb), 1e-12), -1, 1))))
    if angle < 45.0:
        return "same direction", f"travel {angle:.0f} deg apart"
    if angle > 135.0:
        return "opposite direction", f"travel {angle:.0f} deg apart"
    return None, f"travel {angle:.0f} deg apart: neither same nor opposite"


def pair_gap(a: ObjectTrack, b: ObjectTrack, share: float = 0.2) -> tuple[str | None, str]:
    """Towards / away from each other: the gap between two objects shrinks or grows by ``share`` or more."""
    if not (a.motion.moving or b.motion.moving):
        return "not moving", "neither moves"
    gap = np.linalg.norm(a.centres - b.centres, axis=1)
    change = (gap[-1] - gap[0]) / max(gap[0], 1e-9)
    if abs(change) < share:
        return None, f"gap {gap[0]:.2f} -> {gap[-1]:.2f}"
    return ("towards each other" if change < 0 else "away from each other"), f"gap {gap[0]:.2f} -> {gap[-1]:.2f}"


def leading(a: ObjectTrack, b: ObjectTrack, viewmats: np.ndarray) -> tuple[str | None, str]:
    """The left or the right one of two objects travelling together: which is further along their common travel."""
    if not (a.motion.moving and b.motion.moving):
        return None, "both must move"
    heading = (a.centres[-1] - a.centres[0]) + (b.centres[-1] - b.centres[0])
    heading /= max(np.linalg.norm(heading), 1e-9)
    ahead = float((a.centres[-1] - b.centres[-1]) @ heading)
    if abs(ahead) < max(a.motion.size, b.motion.size):
        return None, f"{abs(ahead):.2f} apart along their travel: within an object size"
    first, second = (a, b) if ahead > 0 else (b, a)
    x = [float(np.mean(image_x(t, viewmats))) for t in (first, second)]
    return ("the left one" if x[0] < x[1] else "the right one"), f"leader {abs(ahead):.2f} ahead, image x {x[0]:+.2f} vs {x[1]:+.2f}"


def image_x(t: ObjectTrack, viewmats: np.ndarray) -> np.ndarray:
    """Horizontal image position per frame (camera x over depth: -1..1 is about the field of view's width)."""
    cam = np.einsum("tij,tj->ti", viewmats[:, :3, :3], t.centres) + viewmats[:, :3, 3]
    return cam[:, 0] / np.maximum(cam[:, 2], 1e-6)


def camera_depth(t: ObjectTrack, viewmats: np.ndarray) -> np.ndarray:
    """Distance along each frame's viewing axis."""
    return np.einsum("tj,tj->t", viewmats[:, 2, :3], t.centres) + viewmats[:, 2, 3]
