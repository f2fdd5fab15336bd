"""Camera paths and projection for synthetic scenes (OpenCV convention, world z up).

The world is z-up with the ground at z = 0; cameras follow the project convention
(viewmat = world-to-camera 4x4, x right, y down, z forward; K in pixels). The
input camera starts at ``(0, -distance, height)`` looking at the stage centre,
so "left/right" of the first frame is world -x/+x. Pan, dolly and orbit move it
by a modest amount so every object stays in view; their sign comes from the seed.
"""

from __future__ import annotations

import math

import numpy as np

from recon4d.geometry import camera_centres, pixels_np

UP = np.array([0.0, 0.0, 1.0])
STAGE_TARGET = np.array([0.0, 0.0, 0.4])  # where the input camera looks: object mid-height

PAN_DEG = 24.0  # total yaw sweep of a panning camera
DOLLY_FRACTION = 0.3  # fraction of the distance a dolly covers (in or out)
ORBIT_DEG = 40.0  # total azimuth sweep of an orbiting camera
GLOBAL_VIEW_FOV_DEG = 70.0  # docs/design.md: the "global view" camera


def look_at(eye: np.ndarray, target: np.ndarray) -> np.ndarray:
    """World-to-camera 4x4 for a camera at ``eye`` looking at ``target``, world z up."""
    forward = target - eye
    forward = forward / np.linalg.norm(forward)
    right = np.cross(forward, UP)
    if np.linalg.norm(right) < 1e-8:
        raise ValueError("camera looks straight up or down; look_at is undefined")
    right /= np.linalg.norm(right)
    down = np.cross(forward, right)
    view = np.eye(4)
    view[:3, :3] = np.stack([right, down, forward])
    view[:3, 3] = -view[:3, :3] @ eye
    return view


def intrinsics(fov_deg: float, width: int, height: int) -> np.ndarray:
    """Pinhole K with square pixels, principal point at the image centre, horizontal FoV."""
    f = 0.5 * width / math.tan(math.radians(fov_deg) / 2)
    return np.array([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]])


def camera_path(kind: str, t: np.ndarray, distance: float, height: float, sign: float) -> np.ndarray:
    """Viewmats ``[T, 4, 4]`` for the input camera along path ``kind`` at times ``t`` in [0, 1].

    ``sign`` (+1 or -1) picks the pan/orbit direction and dolly in (+1) or out (-1).
    """
    start = np.array([0.0, -distance, height])
    views = []
    for s in t:
        if kind == "static":
            eye, target = start, STAGE_TARGET
        elif kind == "pan":
            a = math.radians(sign * PAN_DEG * (s - 0.5))
            d = STAGE_TARGET - start
            rot = np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]])
            eye, target = start, start + rot @ d
        elif kind == "dolly":
            k = DOLLY_FRACTION * (s if sign > 0 else 1.0 - s)
            eye = start + k * (STAGE_TARGET - start) * np.array([1.0, 1.0, 0.0])
            target = STAGE_TARGET
        elif kind == "orbit":
            a = math.radians(sign * ORBIT_DEG * (s - 0.5))
            eye = np.array([distance * math.sin(a), -distance * math.cos(a), height])
            target = STAGE_TARGET
        else:
            raise ValueError(f"unknown camera path {kind!r}")
        views.append(look_at(eye, target))
    return np.stack(views)


def to_camera(points: np.ndarray, viewmat: np.ndarray) -> np.ndarray:
    """World points ``[..., 3]`` in the camera frame of one viewmat ``[4, 4]``."""
    return points @ viewmat[:3, :3].T + viewmat[:3, 3]


def project(points: np.ndarray, viewmat: np.ndarray, K: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pixel coordinates ``[..., 2]`` (pixel centres at +0.5) and camera depth ``[...]``."""
    cam = to_camera(points, viewmat)
    return pixels_np(cam, K), cam[..., 2]


def global_view(viewmat: np.ndarray, centre_depth: float) -> np.ndarray:
    """docs/design.md's "global view": 0.5·d behind and 0.2·d above ``viewmat``'s camera,
    looking at the point at depth ``d`` on its optical axis (use with FoV 70°)."""
    eye = camera_centres(viewmat)
    forward = viewmat[2, :3]
    target = eye + centre_depth * forward
    return look_at(eye - 0.5 * centre_depth * forward + 0.2 * centre_depth * UP, target)
