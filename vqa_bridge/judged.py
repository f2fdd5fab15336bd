"""Published, judge-graded VLM4D outputs: load them and score an extractor against them.

VLM4D released each model's raw ``response`` together with the answer two LLM
judges extracted from it (checked by hand). That makes them the reference for
any answer extractor. A folder holds one JSON list per model, named
``<model>_<frames>.json``; the folder name ends in the prompt mode
(``judged_synthetic_cot``, ``judged_synthetic_do``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from recon4d.errors import UserError
from vqa_bridge.extract import LETTERS, NO_ANSWER, normalise

REQUIRED_FIELDS = ("id", "choices", "response", "extracted_answer")


class JudgedFileError(UserError, ValueError):
    """A judged file that cannot be read as a list of graded entries; the message names the file."""


@dataclass(frozen=True)
class Agreement:
    """How often an extractor chose the same letter as the published judge, for one model file."""

    model: str
    mode: str
    n: int
    agree: int
    disagreements: tuple[dict, ...]

    @property
    def fraction(self) -> float:
        return self.agree / self.n if self.n else 1.0


def load_judged(path: Path) -> list[dict]:
    """The entries of one judged file, checked for the fields an extractor needs."""
    try:
        entries = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise JudgedFileError(f"{path}: cannot read as JSON ({err})") from err
    if not isinstance(entries, list):
        raise JudgedFileError(f"{path}: expected a JSON list of entries, got {type(entries).__name__}")
    for i, entry in enumerate(entries):
        missing = [k for k in REQUIRED_FIELDS if not isinstance(entry, dict) or k not in entry]
        if missing:
            raise JudgedFileError(f"{path}: entry {i} lacks {', '.join(missing)}")
        if not isinstance(entry["choices"], dict) or not isinstance(entry["response"], str):
            raise JudgedFileError(f"{path}: entry {i} ({entry['id']}) needs a choices object and a response string")
    return entries


def reference_letter(extracted: str, choices: Mapping[str, object]) -> str:
    """The letter a published ``extracted_answer`` stands for.

    Almost all are ``"B: text"`` or ``"No Valid Answer"``; the letter counts even
    when the text after it is not that option's (the judges copied the model's
    own words). The rare bare text is mapped to the option it equals, else to
    ``NO_ANSWER``.
    """
    extracted = extracted.strip()
    if len(extracted) >= 2 and extracted[0] in LETTERS and extracted[1] == ":":
        return extracted[0]
    for letter, option in choices.items():
        if normalise(str(option)) == normalise(extracted):
            return letter
    return NO_ANSWER


def judged_files(folders: list[Path]) -> list[Path]:
    """Every ``*.json`` in the given folders, sorted; no folder, a missing one or an empty one is an error."""
    if not folders:
        raise FileNotFoundError("no judged folders given")
    files = []
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"judged folder not found: {folder}")
        found = sorted(folder.glob("*.json"))
        if not found:
            raise FileNotFoundError(f"no *.json judged files in {folder}")
        files.extend(found)
    return files


def score_file(path: Path, extractor: Callable[[str, Mapping[str, object]], str]) -> Agreement:
    """Run ``extractor`` on every response of one judged file and compare with the reference letter."""
    path = Path(path)
    entries = load_judged(path)
    misses = []
    for entry in entries:
        want = reference_letter(entry["extracted_answer"], entry["choices"])
        got = extractor(entry["response"], entry["choices"])
        if got != want:
            misses.append({"id": entry["id"], "want": want, "got": got, **{k: entry[k] for k in ("response", "choices")}})
    mode = path.parent.name.rsplit("_", 1)[-1]
    return Agreement(path.stem, mode, len(entries), len(entries) - len(misses), tuple(misses))
