"""VLM4D question files: load them, check each entry, and find the scene folder of each question.

A bad entry must not stop an evaluation of hundreds of questions, so loading
returns the good questions and one message per bad entry, each naming its id.
Videos map to scene folders by name: VLM4D's DAVIS questions point at
``.../davis/<sequence>.mp4`` (folder ``<sequence>``); ``recon4d synth`` writes
``<scene_id>/video.mp4`` (folder ``<scene_id>``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlparse

from vqa_bridge.extract import LETTERS

REQUIRED = ("id", "video", "question", "choices", "answer")


@dataclass(frozen=True)
class Question:
    id: str
    scene: str
    question: str
    choices: dict[str, str]
    answer: str  # the correct letter
    question_type: str


def scene_name(video: str) -> str:
    """Scene folder name of a question's ``video`` (URL or path)."""
    path = PurePosixPath(urlparse(video).path if "://" in video else video)
    return path.parent.name if path.name == "video.mp4" else path.stem


def _question(entry: object, kinds: dict[str, str]) -> Question:
    """One checked question; ValueError says what is wrong with the entry."""
    if not isinstance(entry, dict):
        raise ValueError(f"is a {type(entry).__name__}, not an object")
    missing = [k for k in REQUIRED if k not in entry]
    if missing:
        raise ValueError(f"lacks {', '.join(missing)}")
    if not isinstance(entry["question"], str) or not entry["question"].strip():
        raise ValueError(f"question must be a text, got {entry['question']!r}")
    choices = entry["choices"]
    if not isinstance(choices, dict) or not choices or not set(choices) <= set(LETTERS):
        raise ValueError(f"choices must map letters {'/'.join(LETTERS)} to option texts, got {choices!r}")
    if not isinstance(entry["video"], str) or not scene_name(entry["video"]):
        raise ValueError(f"video {entry['video']!r} names no scene")
    letters = [k for k, v in choices.items() if str(v).strip() == str(entry["answer"]).strip()]
    if len(letters) != 1:
        raise ValueError(f"answer {entry['answer']!r} is {'not one' if not letters else 'more than one'} of the choices")
    qid = str(entry["id"])
    return Question(qid, scene_name(entry["video"]), entry["question"],
                    {k: str(v) for k, v in choices.items()}, letters[0],
                    kinds.get(qid, str(entry.get("question_type", "unknown"))))


def _kinds(qa_file: Path) -> dict[str, str]:
    """Finer question types from a ``recon4d synth`` sidecar (gt/questions.json beside qa.json), if any.

    VLM4D's own ``question_type`` is "multiple-choice" for every question, which says nothing.
    """
    sidecar = qa_file.parent / "gt" / "questions.json"
    try:
        return {str(e["id"]): str(e["kind"]) for e in json.loads(sidecar.read_text())}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def load_questions(qa_file: Path) -> tuple[list[Question], list[str]]:
    """Good questions in file order, and one message per bad entry (naming its id, or its index)."""
    qa_file = Path(qa_file)
    entries = json.loads(qa_file.read_text(encoding="utf-8"))
    if not isinstance(entries, list):
        raise ValueError(f"{qa_file}: expected a JSON list of questions, got {type(entries).__name__}")
    kinds = _kinds(qa_file)
    questions, problems, seen = [], [], set()
    for i, entry in enumerate(entries):
        name = f"question {entry['id']}" if isinstance(entry, dict) and "id" in entry else f"entry {i} (no id)"
        try:
            q = _question(entry, kinds)
        except ValueError as err:
            problems.append(f"{name}: malformed, skipped: {err}")
            continue
        if q.id in seen:
            problems.append(f"{name}: duplicate id, skipped")
            continue
        seen.add(q.id)
        questions.append(q)
    return questions, problems
