"""`recon4d answer`: answer VLM4D-style questions geometrically from a fitted scene (issue 10).

Writes one JSON record per question (JSONL) and the scene's trajectory description
beside it; prints per-kind counts and, when the question file carries answers, ends
with ``accuracy=<fraction>`` ("cannot tell" counts as wrong).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import tyro


@dataclass(frozen=True)
class AnswerConfig:
    """Answer VLM4D-style multiple-choice questions from a fitted scene's trajectories (no VLM)."""

    scene: Path
    """Fitted scene folder (with model/, frames/, priors/)."""
    qa: Path
    """VLM4D-format question file (a JSON list); only the entries whose video names this scene
    (file stem or parent folder equal to the scene's or its source's name) are answered, all when none do."""
    out: Path | None = None
    """JSONL answers (default <scene>/answers.jsonl); the description goes to <out stem>.cues.txt."""
    masks: Path | None = None
    """Instance id masks (Annotations/ folder); default: the input's own, else scaffold clusters."""


def _for_scene(entries: list[dict], scene: Path) -> list[dict]:
    """The entries about this scene's video (a benchmark file holds many videos)."""
    from recon4d.fit.data import frames_info

    names = {scene.name, Path(str(frames_info(scene).get("source", ""))).name}
    mine = [e for e in entries if {Path(str(e.get("video", ""))).stem, Path(str(e.get("video", ""))).parent.name} & names]
    return mine or entries


def main(argv: list[str]) -> int:
    cfg = tyro.cli(AnswerConfig, args=argv, prog="recon4d answer")
    from recon4d.fit.data import MissingStageError
    from recon4d.grounding import answer_file
    from recon4d.io.atomic import atomic_path

    entries = _for_scene(json.loads(Path(cfg.qa).read_text()), Path(cfg.scene))
    try:
        records, cues = answer_file(cfg.scene, entries, cfg.masks)
    except MissingStageError as err:
        print(f"recon4d answer: {err}", file=sys.stderr)
        return 2
    out = cfg.out or Path(cfg.scene) / "answers.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        Path(tmp).write_text("".join(json.dumps(r) + "\n" for r in records))
    with atomic_path(out.with_suffix(".cues.txt")) as tmp:
        Path(tmp).write_text(cues + "\n")
    print(cues)
    by_kind: dict[str, list] = defaultdict(list)
    for r in records:
        by_kind[r["kind"]].append(r)
    for kind, rs in sorted(by_kind.items()):
        told = sum(r["letter"] is not None for r in rs)
        right = sum(bool(r.get("correct")) for r in rs)
        scored = f", {right} right" if any("correct" in r for r in rs) else ""
        print(f"{kind}: {len(rs)} questions, {told} answered{scored}")
    print(f"wrote {out}")
    scored = [r for r in records if "correct" in r]
    if scored:
        print(f"accuracy={sum(r['correct'] for r in scored) / len(scored):.4f}")
    return 0
