"""Frames that do not show an object are no evidence of where it is (trajectories.observed_frames).

On quick real fits a whole object's Gaussians sometimes leave the image for a frame or two while the
video shows it throughout; read as positions, those frames make a still object travel many sizes.
"""

from __future__ import annotations

import numpy as np

from recon4d.grounding.objects import ObjectInstance
from recon4d.grounding.trajectories import observed_frames, track_object

K = np.array([[100.0, 0.0, 50.0], [0.0, 100.0, 50.0], [0.0, 0.0, 1.0]])
T = 12
UP = np.array([0.0, -1.0, 0.0])  # camera axes: y down
VIEWS = np.repeat(np.eye(4)[None], T, 0)


def _blob(centre: np.ndarray, n: int = 200, seed: int = 0) -> np.ndarray:
    return centre + np.random.default_rng(seed).normal(0.0, 0.1, (n, 3))


def _track(points: np.ndarray):
    obj = ObjectInstance(1, np.arange(points.shape[1]))
    observed = observed_frames(points, K, VIEWS, 100, 100)
    return observed, track_object(obj, points, np.ones(points.shape[1]), 0, VIEWS, UP, observed)


def test_a_still_object_that_leaves_the_image_in_two_frames_stays_still():
    points = np.stack([_blob(np.array([0.0, 0.0, 5.0]))] * T)
    points[7:9] += np.array([0.0, 0.0, -10.0])  # behind the camera: the fit lost it there
    observed, track = _track(points)
    assert observed.tolist() == [True] * 7 + [False] * 2 + [True] * 3
    assert not track.motion.moving and track.motion.path < 0.05


def test_motion_between_observed_frames_is_kept():
    centres = np.stack([np.array([-1.0 + 2.0 * t / (T - 1), 0.0, 5.0]) for t in range(T)])
    points = np.stack([_blob(c) for c in centres])
    points[5] += np.array([40.0, 0.0, 0.0])  # far off to the right, out of the image
    observed, track = _track(points)
    assert observed.sum() == T - 1
    assert track.motion.moving and track.motion.lateral > 1.8 and track.motion.reach < 2.2
