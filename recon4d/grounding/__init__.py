"""Explicit 4D grounding: object trajectories from a fitted scene, text cues, geometric answers.

``describe_scene(scene_dir)`` gives the trajectory description the VQA bridge's
``raw+cues`` modality puts in the prompt; ``answer_file`` answers a VLM4D question
file from the geometry alone. Neither reads ground truth: only the fitted model,
its priors, and instance id masks when the input ships them.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from recon4d.grounding.answerer import answer_question, scene_nouns
from recon4d.grounding.describe import describe
from recon4d.grounding.trajectories import load_tracks


def describe_scene(scene_dir: Path | str, masks: Path | None = None) -> str:
    """Deterministic text describing every moving object's trajectory in the fitted scene."""
    return describe(load_tracks(Path(scene_dir), masks))


def answer_file(scene_dir: Path | str, entries: list[dict], masks: Path | None = None) -> tuple[list[dict], str]:
    """One record per VLM4D entry (the answer, its letter, kind, reasoning numbers, correctness when known)."""
    st = load_tracks(Path(scene_dir), masks)
    nouns = scene_nouns(entries)
    records = []
    for entry in entries:
        rec = {"id": entry.get("id"), "question": entry["question"], **asdict(answer_question(entry, st, nouns))}
        if "answer" in entry:
            rec["truth"] = entry["answer"]
            rec["correct"] = rec["letter"] is not None and str(rec["answer"]) == str(entry["answer"])
        records.append(rec)
    return records, describe(st)
