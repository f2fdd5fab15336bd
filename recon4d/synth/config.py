"""The typed configuration of ``recon4d synth``, its presets and its argument checks.

One frozen dataclass is both the CLI (through tyro) and the record written to
``synth.json``, so a scene is regenerated from that file alone. Checks that can
be made before any geometry exists live here; checks that need the layout
(camera inside an object, objects out of view) live in :mod:`.layout`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from recon4d.errors import UserError

# Scripted object motions. Directions are from the first frame's camera;
# follow_* heads follow_offset_deg to the left/right of object 1's heading.
MOTIONS = (
    "static",
    "left",
    "right",
    "toward",
    "away",
    "turn_left",
    "turn_right",
    "spin_cw",
    "spin_ccw",
    "follow_left",
    "follow_right",
)
TRANSLATIONS = ("left", "right", "toward", "away")
CAMERAS = ("static", "pan", "dolly", "orbit")

# Minimal-pair factor -> (motion in scene a, motion in scene b), and which object changes
# (0-based): follow pairs change the follower, everything else changes the first object.
PAIR_FACTORS: dict[str, tuple[tuple[str, str], int]] = {
    "direction": (("left", "right"), 0),
    "approach": (("toward", "away"), 0),
    "turn": (("turn_left", "turn_right"), 0),
    "spin": (("spin_cw", "spin_ccw"), 0),
    "follow": (("follow_left", "follow_right"), 1),
}

MAX_OBJECTS = 3


class SynthError(UserError, ValueError):
    """A bad ``recon4d synth`` argument, with a message that says what to change."""


@dataclass(frozen=True)
class SynthConfig:
    """Generate a synthetic dynamic scene with full ground truth and VLM4D-style questions."""

    out: Path = Path("out/synth")
    """Output folder; each scene goes to <out>/<scene_id>/."""
    preset: Literal["tiny", "small", "realistic"] = "tiny"
    """Starting values for frames/size/detail; explicit flags override them."""
    seed: int = 0
    """Everything random (layout, colours, question order) derives from this seed."""
    frames: int = 24
    """Number of frames."""
    size: tuple[int, int] = (128, 96)
    """Image width and height in pixels (both even, for the mp4)."""
    fps: int = 12
    """Frame rate of video.mp4."""
    camera: str = "static"
    """Camera path: static, pan, dolly or orbit."""
    motion: tuple[str, ...] = ()
    """One motion per object (1-3 objects), e.g. `--motion left spin_cw`; empty: drawn from the seed.
    Choices: static left right toward away turn_left turn_right spin_cw spin_ccw follow_left follow_right."""
    objects: int = 0
    """Number of objects when --motion is empty (0: drawn from the seed, 1-3)."""
    pairs: str | None = None
    """Emit a minimal pair differing only in this factor: direction, approach, turn, spin or follow."""
    fov_deg: float = 60.0
    """Horizontal field of view of the input camera, degrees, in (0, 180)."""
    camera_distance: float = 6.0
    """Horizontal distance from the camera to the stage centre, metres."""
    camera_height: float = 2.5
    """Camera height above the ground, metres."""
    detail: float = 1.0
    """Gaussian density multiplier (more Gaussians: smoother surfaces, slower rendering)."""
    follow_offset_deg: float = 30.0
    """Heading offset of a follow_left/follow_right object from its leader, degrees."""
    scene_id: str | None = None
    """Scene folder name; default synth_s<seed> (pairs add _<factor>_<motion>)."""
    novel: bool = True
    """Also render the global-view novel camera into gt/novel/."""

    def validate(self) -> None:
        """Raise :class:`SynthError` for arguments no scene can satisfy."""
        if self.seed < 0:
            raise SynthError(f"--seed must be non-negative, got {self.seed}")
        if self.frames < 2:
            raise SynthError(f"--frames must be at least 2 (motion needs two frames), got {self.frames}")
        w, h = self.size
        if w < 16 or h < 16:
            raise SynthError(f"--size must be at least 16x16 pixels, got {w}x{h}")
        if w % 2 or h % 2:
            raise SynthError(f"--size must be even in both dimensions (the mp4 is yuv420p), got {w}x{h}")
        if self.fps < 1:
            raise SynthError(f"--fps must be positive, got {self.fps}")
        if not (0.0 < self.fov_deg < 180.0) or not math.isfinite(self.fov_deg):
            raise SynthError(f"--fov-deg must be strictly between 0 and 180 degrees, got {self.fov_deg}")
        if self.camera not in CAMERAS:
            raise SynthError(f"unknown --camera {self.camera!r}; choose one of {', '.join(CAMERAS)}")
        if self.camera_height <= 0.0:
            raise SynthError(f"--camera-height must be above the ground (> 0 m), got {self.camera_height}")
        if self.camera_distance <= 0.0:
            raise SynthError(f"--camera-distance must be positive, got {self.camera_distance}")
        if self.detail <= 0.0:
            raise SynthError(f"--detail must be positive, got {self.detail}")
        if not (0.0 < self.follow_offset_deg < 90.0):
            raise SynthError(f"--follow-offset-deg must be in (0, 90), got {self.follow_offset_deg}")
        for name in self.motion:
            if name not in MOTIONS:
                raise SynthError(f"unknown motion {name!r}; choose from: {' '.join(MOTIONS)}")
        if len(self.motion) > MAX_OBJECTS:
            raise SynthError(f"at most {MAX_OBJECTS} objects (one --motion each), got {len(self.motion)}")
        if not (0 <= self.objects <= MAX_OBJECTS):
            raise SynthError(f"--objects must be 0 (from the seed) or 1-{MAX_OBJECTS}, got {self.objects}")
        if self.motion and self.objects and self.objects != len(self.motion):
            raise SynthError(f"--objects {self.objects} disagrees with {len(self.motion)} --motion values")
        for i, name in enumerate(self.motion):
            if name.startswith("follow") and (i == 0 or self.motion[0] not in TRANSLATIONS):
                raise SynthError(
                    f"motion {name!r} follows the first object, which must come first and translate "
                    f"({', '.join(TRANSLATIONS)}); got --motion {' '.join(self.motion)}"
                )
        if self.pairs is not None:
            if self.pairs not in PAIR_FACTORS:
                raise SynthError(f"unknown --pairs factor {self.pairs!r}; choose from: {', '.join(PAIR_FACTORS)}")
            _, changed = PAIR_FACTORS[self.pairs]
            if changed and self.objects == 1:
                raise SynthError(f"--pairs {self.pairs} needs at least {changed + 1} objects, got --objects 1")
            if self.motion and changed >= len(self.motion):
                raise SynthError(f"--pairs {self.pairs} changes object {changed + 1}, but only {len(self.motion)} --motion given")


PRESETS: dict[str, SynthConfig] = {
    # Tests and the README demo: a few seconds on 2 CPU cores.
    "tiny": SynthConfig(preset="tiny", frames=24, size=(128, 96), fps=12, detail=1.0),
    "small": SynthConfig(preset="small", frames=48, size=(320, 240), fps=12, detail=1.5),
    # DAVIS-like: 80 frames at 854x480.
    "realistic": SynthConfig(preset="realistic", frames=80, size=(854, 480), fps=24, detail=2.0),
}


def preset(name: str, **overrides) -> SynthConfig:
    """A preset with some fields replaced (the Python twin of `--preset NAME --field value`)."""
    if name not in PRESETS:
        raise SynthError(f"unknown preset {name!r}; choose from: {', '.join(PRESETS)}")
    return dataclasses.replace(PRESETS[name], **overrides)
