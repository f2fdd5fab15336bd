"""`recon4d render --scene DIR --path {input,global,orbit,birdseye,fixed}`: videos and feature maps.

See recon4d/render/video.py for what is written and recon4d/render/cameras.py for the paths.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Literal

import tyro

from recon4d.render.video import RenderJob


@dataclass
class RenderCommand(RenderJob):
    path: Literal["input", "global", "orbit", "birdseye", "fixed"] = "global"
    """Camera path: input cameras, the DESIGN.md global view, an orbit, top-down, or frame --cameras.frame frozen."""


def main(argv: list[str]) -> int:
    from recon4d.fit.data import MissingStageError
    from recon4d.render.video import run_render

    cmd = tyro.cli(RenderCommand, args=argv, prog="recon4d render")
    try:
        summary = run_render(cmd)
    except MissingStageError as exc:
        print(f"recon4d render: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"recon4d render: {exc}", file=sys.stderr)
        return 2
    line = f"rendered {summary['frames']} frames at {summary['width']}x{summary['height']} -> {summary['out']}"
    if "psnr" in summary:
        line += f"  (input-view PSNR {summary['psnr']:.2f} dB)"
    print(line)
    return 0
