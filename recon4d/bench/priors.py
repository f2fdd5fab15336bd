"""`recon4d bench priors`: seconds per preprocessing provider for 50 frames at 480x270.

Why per provider: the stage's time is dominated by one or two steps, and which
one depends on the provider chosen; one line each says where the time goes.
Input: DAVIS blackswan from ../shared/data when present, else a synth scene
(``--video`` to choose). Prints ``provider=<name> seconds=<s>`` lines.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

from recon4d.priors.options import PreprocessConfig
from recon4d.priors.pipeline import run_preprocess

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "davis" / "blackswan"


@dataclass
class BenchPriors:
    video: Path | None = None
    """Input (default: DAVIS blackswan, else a generated synth pan scene)."""
    frames: int = 50
    long_side: int = 480
    quick: bool = False
    """20 frames instead of 50."""


def main(argv: list[str]) -> int:
    cfg = tyro.cli(BenchPriors, args=argv, prog="recon4d bench priors")
    frames = 20 if cfg.quick else cfg.frames
    with tempfile.TemporaryDirectory() as tmp:
        video = cfg.video or (SHARED if SHARED.exists() else None)
        if video is None:
            from recon4d.synth import generate, preset

            generate(preset("small", out=Path(tmp) / "synth", camera="pan", frames=frames, novel=False))
            video = Path(tmp) / "synth" / "synth_s0"
        start = time.perf_counter()
        scene = run_preprocess(PreprocessConfig(video=video, out=Path(tmp) / "out", max_frames=frames,
                                                long_side=cfg.long_side, progress=False), log=lambda _: None)
        total = time.perf_counter() - start
        r = json.loads((scene / "priors" / "report.json").read_text())
    names = {"ingest": "pyav/opencv", "flow": "dis", "tracks": "chained", "camera": "ba", "points": "triangulation",
             "depth": r["depth_provider"], "masks": "motion"}
    print(f"input={video} frames={r['frames']} size={r['width']}x{r['height']} motion={r['motion_type']} "
          f"tracks={r['tracks_kept']}")
    for step, seconds in r["time_s"].items():
        if step in names:
            print(f"step={step} provider={names[step]} seconds={seconds:.2f}")
    print(f"total_seconds={total:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
