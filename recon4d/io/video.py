"""Writing mp4 videos with PyAV (reading is a separate job, added by the frames stage).

The encoder is chosen at run time because PyAV wheels differ between machines:
H.264 (libx264) where it exists, MPEG-4 part 2 otherwise; both are built into
the wheels and work offline. Output is bit-identical for identical frames, which
the synthetic-scene determinism test relies on.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import av
import numpy as np

from recon4d.io.atomic import atomic_path

# Preferred first. libx264 is deterministic with its default settings.
ENCODERS = ("libx264", "mpeg4")


def pick_encoder() -> str:
    """The first encoder in ``ENCODERS`` that this PyAV build can open."""
    for name in ENCODERS:
        if name in av.codecs_available:
            return name
    raise RuntimeError(f"PyAV has none of the video encoders {ENCODERS}; reinstall `av`")


def write_video(
    path: str | os.PathLike,
    frames: Iterable[np.ndarray],
    fps: int,
    crf: int = 18,
) -> Path:
    """Encode RGB ``uint8`` frames ``[H, W, 3]`` to ``path`` (mp4), atomically.

    Width and height must be even (yuv420p subsamples chroma by two).
    """
    codec = pick_encoder()
    with atomic_path(path) as tmp:
        with av.open(str(tmp), mode="w", format="mp4") as container:
            stream = None
            for frame in frames:
                if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] != 3:
                    raise ValueError(f"frames must be uint8 [H, W, 3], got {frame.dtype} {frame.shape}")
                if stream is None:
                    h, w = frame.shape[:2]
                    if h % 2 or w % 2:
                        raise ValueError(f"video size must be even for yuv420p, got {w}x{h}")
                    stream = container.add_stream(codec, rate=fps)
                    stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
                    if codec == "libx264":
                        stream.options = {"crf": str(crf), "preset": "medium"}
                    else:
                        stream.bit_rate = 8 * w * h * fps // 10
                for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(frame), format="rgb24")):
                    container.mux(packet)
            if stream is None:
                raise ValueError("no frames to write")
            for packet in stream.encode():
                container.mux(packet)
    return Path(path)
