"""`recon4d answer`: answer VLM4D-style questions geometrically from a fitted scene.

Writes one JSON record per question (JSONL) and the scene's trajectory description
beside it; prints per-kind counts and ends with ``accuracy=<fraction>`` ("cannot tell"
counts as wrong). The question file is checked as `recon4d vqa run` checks it: a
malformed entry is reported by id and skipped.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import tyro

from recon4d.errors import UserError, expected_errors, log_tracebacks_to
from vqa_bridge.vlm4d import Question, load_questions


@dataclass(frozen=True)
class AnswerConfig:
    """Answer VLM4D-style multiple-choice questions from a fitted scene's trajectories (no VLM)."""

    scene: Path
    """Fitted scene folder (with model/, frames/, priors/)."""
    qa: Path
    """VLM4D-format question file (a JSON list); only the entries whose video names this scene
    (as `recon4d vqa run` maps videos to scene folders; or the scene's source) are answered, all when none do."""
    out: Path | None = None
    """JSONL answers (default <scene>/answers.jsonl); the description goes to <out stem>.cues.txt."""
    masks: Path | None = None
    """Instance id masks (Annotations/ folder); default: the input's own, else the priors' motion masks."""


def _questions(qa: Path) -> list[Question]:
    """The well-formed questions of ``qa``, checked as `recon4d vqa run` checks them: each bad entry is
    reported by id on stderr and skipped; a file with nothing left to answer is a UserError."""
    try:
        questions, problems = load_questions(qa)
    except OSError as err:  # missing, unreadable
        raise UserError(f"cannot read question file {qa}: {err.strerror or err}") from err
    except ValueError as err:  # not JSON, not a list (the message may name the file already)
        raise UserError(str(err) if str(qa) in str(err) else f"{qa} is not a VLM4D question file: {err}") from err
    if not questions:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UserError(f"{qa} has no question to answer" + (f": {problems[0]}{more}" if problems else ""))
    for message in problems:
        print(message, file=sys.stderr)
    return questions


def _for_scene(questions: list[Question], scene: Path) -> list[Question]:
    """The questions about this scene's video (a benchmark file holds many videos)."""
    from recon4d.scene_folder import SceneFolder

    names = {scene.name, Path(str(SceneFolder(scene).frames_info().get("source", ""))).name}
    return [q for q in questions if q.scene in names] or questions


def _entry(q: Question) -> dict:
    """The VLM4D entry the answerer reads, rebuilt from a checked question (the answer as its choice's text)."""
    return {"id": q.id, "question": q.question, "choices": q.choices, "answer": q.choices[q.answer]}


@expected_errors("answer")
def main(argv: list[str]) -> int:
    cfg = tyro.cli(AnswerConfig, args=argv, prog="recon4d answer")
    from recon4d.grounding import answer_file
    from recon4d.io.atomic import atomic_path

    log_tracebacks_to(Path(cfg.scene) / "log.txt")
    questions = _for_scene(_questions(Path(cfg.qa)), Path(cfg.scene))
    records, cues = answer_file(cfg.scene, [_entry(q) for q in questions], cfg.masks)
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
        print(f"{kind}: {len(rs)} questions, {told} answered, {sum(r['correct'] for r in rs)} right")
    print(f"wrote {out}")
    print(f"accuracy={sum(r['correct'] for r in records) / len(records):.4f}")
    return 0
