"""`recon4d eval --scene DIR [--gt SYNTH_DIR]`: fitted scene vs its synthetic ground truth."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro

from recon4d.errors import expected_errors, log_tracebacks_to


@dataclass
class EvalCommand:
    scene: Path
    """A fitted scene folder (from `recon4d fit`)."""
    gt: Path | None = None
    """The `recon4d synth` scene it came from (default: the source recorded in frames.json)."""


@expected_errors("eval")
def main(argv: list[str]) -> int:
    from recon4d.eval import evaluate_scene

    cmd = tyro.cli(EvalCommand, args=argv, prog="recon4d eval")
    log_tracebacks_to(cmd.scene / "log.txt")
    metrics = evaluate_scene(cmd.scene, cmd.gt)
    for key in ("psnr_train", "psnr_novel", "traj_err_rel", "direction_correct", "feat_cos"):
        if key in metrics:
            print(f"{key}={metrics[key]}")
    print(f"written: {cmd.scene / 'metrics.json'}")
    print(json.dumps({k: v for k, v in metrics.items() if k != "objects"}), file=sys.stderr)
    return 0
