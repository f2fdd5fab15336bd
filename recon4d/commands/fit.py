"""`recon4d fit`: reconstruct a 4D feature field from a video (issues 5 and 6).

Only preprocessing exists so far (issue 5): `--stop-after priors` runs ingestion
and every prior into `<out>/<name>/` and prints a short report. Without it the
command still runs preprocessing, then says that optimisation is not built and
exits 2. The optimisation stages will extend `FitConfig` and the dispatch below.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from typing import Literal

import tyro

from recon4d.fit.preprocess import PreprocessConfig


@dataclass
class FitConfig(PreprocessConfig):
    """Reconstruct a 4D feature field from a monocular video."""

    stop_after: Literal["priors"] | None = None
    """Stop after this stage (priors: frames + depth, flow, tracks, masks, camera)."""


def main(argv: list[str]) -> int:
    cfg = tyro.cli(FitConfig, args=argv, prog="recon4d fit")
    from recon4d.fit.preprocess import run_preprocess
    from recon4d.io.frames import IngestError

    start = time.perf_counter()
    try:
        scene = run_preprocess(cfg)
    except (IngestError, ValueError, FileNotFoundError) as err:
        print(f"recon4d fit: {err}", file=sys.stderr)
        return 2
    print(summary(json.loads((scene / "priors" / "report.json").read_text()), scene))
    print(f"priors done in {time.perf_counter() - start:.1f}s")
    if cfg.stop_after == "priors":
        return 0
    print("recon4d fit: optimisation stages are not built yet (issue 6); stopped after priors.", file=sys.stderr)
    return 2


def summary(r: dict, scene) -> str:
    """The short report: frames, tracks kept, camera motion, time per step, and GT metrics when present."""
    steps = ", ".join(f"{k} {v:.1f}s" for k, v in r["time_s"].items())
    lines = [f"{scene}: {r['frames']} frames {r['width']}x{r['height']}, {r['tracks_kept']} tracks kept "
             f"({r['tracks_static_ba']} static in BA), camera {r['motion_type']}, FoV {r['fov_deg']:.1f} deg, "
             f"depth {r['depth_provider']}", f"time: {steps}"]
    if "user_mask_tracks" in r:
        m = r["user_mask_tracks"]
        lines.append(f"user mask: {m['seeded_inside']} tracks seeded inside, stay inside {m['stay_strict']}, "
                     f"within 3px {m['stay_within_3px']}")
    if "rot_err_deg" in r:
        lines.append("ground truth: " + ", ".join(f"{k} {r[k]}" for k in
                     ("rot_err_deg", "trans_dir_err_deg", "focal_err_rel", "track_err_px", "mask_iou")))
    return "\n".join(lines)
