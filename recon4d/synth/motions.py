"""Scripted object motions: per-frame centre and heading for each motion name.

All motions happen on the ground plane (z fixed) at constant speed over the
clip, so the ground truth of "which way" is unambiguous. Left/right/toward/away
are defined from the first frame's camera; the object's front (local +x) faces
the way it travels, so "forwards from its own perspective" is well defined.
"""

from __future__ import annotations

import math

import numpy as np

from recon4d.geometry import camera_centres

TRANSLATE_LENGTH = 1.8  # metres travelled over the clip by translations and follows
TURN_RADIUS = 1.2  # metres; turns sweep TURN_ANGLE along a circle of this radius
TURN_ANGLE = math.radians(90.0)
SPIN_ANGLE = math.radians(180.0)  # half a turn: no aliasing even at 8 sampled frames
FOLLOW_GAP = 1.6  # metres between leader and follower at the start


def travel_direction(motion: str, start_xy: np.ndarray, view0: np.ndarray) -> np.ndarray:
    """Unit ground direction of a translation, from the first camera ``view0``."""
    right = view0[0, :2] / np.linalg.norm(view0[0, :2])
    to_camera = camera_centres(view0)[:2] - start_xy
    to_camera /= np.linalg.norm(to_camera)
    return {"left": -right, "right": right, "toward": to_camera, "away": -to_camera}[motion]


def displacement(motion: str, heading: float) -> np.ndarray:
    """Ground displacement over the clip of a motion starting with ``heading`` (for centring paths)."""
    if motion in ("left", "right", "toward", "away") or motion.startswith("follow"):
        return TRANSLATE_LENGTH * np.array([math.cos(heading), math.sin(heading)])
    if motion.startswith("turn"):
        sign = 1.0 if motion == "turn_left" else -1.0
        end = heading + sign * TURN_ANGLE
        return sign * TURN_RADIUS * np.array([math.sin(end) - math.sin(heading), math.cos(heading) - math.cos(end)])
    return np.zeros(2)


def trajectory(motion: str, start_xy: np.ndarray, heading: float, z: float, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre ``[T, 3]`` and yaw ``[T]`` of ``motion`` started at ``start_xy`` facing ``heading``.

    For translations and follows ``heading`` is the travel direction; for turns it
    is the initial heading; for spins and static objects it is the fixed/initial yaw.
    Turning left is a positive yaw rate (counter-clockwise seen from above, z up).
    """
    if motion == "static":
        yaw = np.full_like(t, heading)
        xy = np.broadcast_to(start_xy, (len(t), 2))
    elif motion in ("spin_cw", "spin_ccw"):
        sign = 1.0 if motion == "spin_ccw" else -1.0
        yaw = heading + sign * SPIN_ANGLE * t
        xy = np.broadcast_to(start_xy, (len(t), 2))
    elif motion in ("turn_left", "turn_right"):
        sign = 1.0 if motion == "turn_left" else -1.0
        yaw = heading + sign * TURN_ANGLE * t
        xy = start_xy + sign * TURN_RADIUS * np.stack(
            [np.sin(yaw) - math.sin(heading), math.cos(heading) - np.cos(yaw)], axis=-1
        )
    elif motion in ("left", "right", "toward", "away") or motion.startswith("follow"):
        yaw = np.full_like(t, heading)
        xy = start_xy + t[:, None] * displacement(motion, heading)
    else:
        raise ValueError(f"unknown motion {motion!r}")
    centre = np.concatenate([xy, np.full((len(t), 1), z)], axis=-1)
    return centre, yaw


def follow_heading(motion: str, leader_heading: float, offset_deg: float) -> float:
    """Heading of a follower: ``offset_deg`` to the left (+) or right (-) of its leader's."""
    sign = 1.0 if motion == "follow_left" else -1.0
    return leader_heading + sign * math.radians(offset_deg)
