"""`recon4d eval --scene DIR [--gt SYNTH_DIR]`: fitted scene vs its synthetic ground truth."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import tyro


@dataclass
class EvalCommand:
    scene: Path
    """A fitted scene folder (from `recon4d fit`)."""
    gt: Path | None = None
    """The `recon4d synth` scene it came from (default: the source recorded in frames.json)."""


def main(argv: list[str]) -> int:
    from recon4d.eval import evaluate_scene
    from recon4d.fit.data import MissingStageError

    cmd = tyro.cli(EvalCommand, args=argv, prog="recon4d eval")
    try:
        metrics = evaluate_scene(cmd.scene, cmd.gt)
    except MissingStageError as exc:
        print(f"recon4d eval: {exc}", file=sys.stderr)
        return 2
    for key in ("psnr_train", "psnr_novel", "traj_err_rel", "direction_correct", "feat_cos"):
        if key in metrics:
            print(f"{key}={metrics[key]}")
    print(f"written: {cmd.scene / 'metrics.json'}")
    print(json.dumps({k: v for k, v in metrics.items() if k != "objects"}), file=sys.stderr)
    return 0
