"""`recon4d render --scene DIR --path {input,global,orbit,birdseye,fixed}`: videos and feature maps.

See recon4d/render/video.py for what is written and recon4d/render/cameras.py for the paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import tyro

from recon4d.errors import UserError, expected_errors, log_tracebacks_to
from recon4d.render.video import RenderJob


@dataclass
class RenderCommand(RenderJob):
    path: Literal["input", "global", "orbit", "birdseye", "fixed"] = "global"
    """Camera path: input cameras, the docs/design.md global view, an orbit, top-down, or frame --cameras.frame frozen."""


@expected_errors("render")
def main(argv: list[str]) -> int:
    from recon4d.render.video import run_render

    cmd = tyro.cli(RenderCommand, args=argv, prog="recon4d render")
    log_tracebacks_to(cmd.scene / "log.txt")
    try:
        summary = run_render(cmd)
    except ValueError as exc:  # a bad --frames/--decode/--cameras.frame for this scene
        raise UserError(str(exc)) from exc
    line = f"rendered {summary['frames']} frames at {summary['width']}x{summary['height']} -> {summary['out']}"
    if "psnr" in summary:
        line += f"  (input-view PSNR {summary['psnr']:.2f} dB)"
    print(line)
    return 0
