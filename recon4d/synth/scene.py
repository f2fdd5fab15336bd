"""The resolved description of one synthetic scene: objects, trajectories, cameras.

Everything downstream (rendering, questions, ground-truth files) reads a
:class:`Scene`; nothing random happens after it is built, which is what makes
a scene reproducible from its seed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Colour names a question can use, with the RGB the object is painted in.
COLOURS: dict[str, tuple[float, float, float]] = {
    "red": (0.85, 0.12, 0.10),
    "green": (0.12, 0.68, 0.20),
    "blue": (0.12, 0.28, 0.92),
    "yellow": (0.95, 0.82, 0.08),
    "purple": (0.58, 0.18, 0.78),
    "orange": (1.00, 0.50, 0.05),
}
# Shape -> dimensions in metres: cube (side), ball (radius), cylinder (radius, height).
SHAPES: dict[str, tuple[float, ...]] = {"cube": (0.8,), "ball": (0.45,), "cylinder": (0.35, 0.9)}
# Nouns that never appear in a scene, for questions about absent objects.
ABSENT_SHAPES = ("cone", "pyramid", "ring")


def half_height(shape: str) -> float:
    """Height of the shape's centre above the ground when it rests on it."""
    dims = SHAPES[shape]
    return dims[-1] / 2 if shape in ("cube", "cylinder") else dims[0]


def bounding_radius(shape: str) -> float:
    """Radius of the sphere around the centre that contains the whole shape."""
    dims = SHAPES[shape]
    if shape == "cube":
        return dims[0] * math.sqrt(3) / 2
    if shape == "cylinder":
        return math.hypot(dims[0], dims[1] / 2)
    return dims[0]


@dataclass
class SceneObject:
    """One rigid object: its look, its motion name and its per-frame pose."""

    id: int  # mask id in Annotations/ (1-based; 0 is background)
    colour: str
    shape: str
    motion: str
    centre: np.ndarray  # [T, 3] world position of the shape's centre
    yaw: np.ndarray  # [T] heading about world z; the object's front is its local +x

    @property
    def name(self) -> str:
        return f"{self.colour} {self.shape}"

    @property
    def radius(self) -> float:
        return bounding_radius(self.shape)

    def quats(self) -> np.ndarray:
        """Per-frame orientation ``[T, 4]`` (w, x, y, z): a rotation by ``yaw`` about z."""
        half = self.yaw / 2
        zeros = np.zeros_like(half)
        return np.stack([np.cos(half), zeros, zeros, np.sin(half)], axis=-1)


@dataclass
class Scene:
    """A complete scene: what is rendered and what the questions are computed from."""

    scene_id: str
    seed: int
    objects: list[SceneObject]
    K: np.ndarray  # [3, 3] input camera intrinsics
    viewmats: np.ndarray  # [T, 4, 4] input camera, world-to-camera
    width: int
    height: int
    camera_sign: float  # direction of pan/orbit/dolly drawn from the seed
    pair: dict | None = None  # {"factor", "motion", "partner"} for minimal pairs
    layout_attempt: int = 0  # which placement attempt passed the checks (for the record)

    @property
    def frames(self) -> int:
        return self.viewmats.shape[0]
