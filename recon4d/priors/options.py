"""The options of the frames and priors: what ``recon4d fit``, ``batch`` and the presets pass to
:func:`recon4d.priors.pipeline.run_preprocess` (kept apart so that parsing a command line does not
import the priors' code)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal


@dataclass
class PriorOptions:
    """How frames are read and priors made: the options ``recon4d fit`` passes through (``--fov-deg`` ...)."""

    stride: int = 1
    """Keep every stride-th frame."""
    start: int = 0
    """First source frame."""
    end: int | None = None
    """Source frame to stop before (default: the end)."""
    max_frames: int | None = None
    """At most this many frames."""
    spread: bool = False
    """With --max-frames: that many frames spread evenly over the selection, not its first ones."""
    long_side: int | None = 480
    """Working resolution: long side in pixels (never upscaled)."""
    allow_truncated: bool = False
    """Keep the frames of a truncated/corrupt video decoded before the damage."""
    masks: Path | None = None
    """Folder of user masks (PNG, one per source frame); default: DAVIS Annotations/ when present."""
    depth: str = "auto"
    """Depth provider: auto (Depth Anything V2 if its weights are local, else fallback), da-v2 (Depth Anything
    V2, downloaded from the hub if not local), fallback,
    gt (synth scenes, ablations only), or a folder of depth files (npy / 16-bit png in mm / exr)."""
    depth_model: str = "depth-anything/Depth-Anything-V2-Small-hf"
    """Depth Anything V2: a local directory or a hub id (in the local HF cache; downloaded only with --depth da-v2)."""
    camera: Literal["solve", "gt"] = "solve"
    """Camera: solve (bundle adjustment) or gt (synth scenes, ablations of later stages)."""
    fov_deg: float | None = None
    """Known horizontal field of view in degrees (default: searched)."""
    track_spacing: int = 0
    """Seed grid spacing of the tracks in pixels (0: long side / 60, at least 4)."""
    max_tracks: int = 6000
    """Upper bound on the number of tracks."""


@dataclass(kw_only=True)
class PreprocessConfig(PriorOptions):
    """Frames and priors for one video."""

    video: Path
    """Input: a video file (mp4/mov/avi/webm), an image folder, a DAVIS sequence or a `recon4d synth` scene."""
    out: Path = Path("out")
    """Output root; the scene folder is <out>/<name>/."""
    name: str | None = None
    """Scene folder name (default: the input's name; for a synth scene its scene id)."""
    progress: bool = True
    """Progress bars."""
