"""`recon4d synth`: write synthetic dynamic scenes with ground truth and VLM4D questions.

`--preset tiny|small|realistic` picks the starting values (frames, size, detail);
any other flag overrides them. Bad arguments end with one clear line and exit 2.
"""

from __future__ import annotations

import time

import tyro

from recon4d.commands._args import option_value
from recon4d.errors import UserError, expected_errors
from recon4d.synth.config import PRESETS, SynthConfig


@expected_errors("synth")
def main(argv: list[str]) -> int:
    name = option_value(argv, "--preset", "tiny")
    if name not in PRESETS:
        raise UserError(f"unknown preset {name!r}; choose from: {', '.join(PRESETS)}")
    cfg = tyro.cli(SynthConfig, default=PRESETS[name], args=argv, prog="recon4d synth")
    from recon4d.synth.pipeline import generate

    start = time.perf_counter()
    reports = generate(cfg, progress=True)
    for r in reports:
        print(f"{r.path}: {cfg.frames} frames {cfg.size[0]}x{cfg.size[1]}, {r.gaussians} Gaussians, "
              f"{r.questions} questions, rendering {r.render_s:.1f}s ({r.render_s / cfg.frames * 1000:.0f} ms/frame), "
              f"total {r.total_s:.1f}s")
    print(f"done in {time.perf_counter() - start:.1f}s")
    return 0
