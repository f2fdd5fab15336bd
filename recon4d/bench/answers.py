"""The geometric answerer's record on a benchmark's questions: per question, per question kind, and against
each published VLM on the same questions.

Why apart from the per-sequence table: a sequence row says how many of its four or five questions were
right; what decides the next change to the answerer is which *kinds* of question fail, how often it
declines ("cannot tell"), and whether it is right where the published models are wrong or only where
they are right too. Written as ``answers.json`` (every record) and ``answers.md`` (the two tables).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

ANSWER_FIELDS = ("id", "kind", "question", "answer", "letter", "truth", "correct", "why", "bound_to")


def question_records(sequence: str, answers: list[dict], published: dict[str, dict[str, int]]) -> list[dict]:
    """One flat record per answered question: the answerer's fields and each published model's mark (1/0)."""
    return [{"sequence": sequence, **{k: a.get(k) for k in ANSWER_FIELDS},
             "published": published.get(a.get("id"), {})} for a in answers]


def by_kind(records: list[dict]) -> list[dict]:
    """Per question kind: questions, right, cannot tell, and the share right; most frequent kind first."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[r["kind"]].append(r)
    rows = [{"kind": kind, "questions": len(rs), "right": sum(bool(r["correct"]) for r in rs),
             "cannot_tell": sum(r["letter"] is None for r in rs)} for kind, rs in groups.items()]
    for row in rows:
        row["accuracy"] = row["right"] / row["questions"]
    return sorted(rows, key=lambda r: (-r["questions"], r["kind"]))


def against_published(records: list[dict], columns: dict[str, str]) -> list[dict]:
    """Per published model (``columns``: label -> column): its accuracy on the questions it was scored on,
    ours on the same questions, and the four-way split (both right, only ours, only theirs, neither)."""
    rows = []
    for label, column in columns.items():
        scored = [r for r in records if column in r["published"]]
        ours = [bool(r["correct"]) for r in scored]
        theirs = [bool(r["published"][column]) for r in scored]
        pairs = list(zip(ours, theirs, strict=True))
        rows.append({"model": label, "questions": len(scored),
                     "theirs": sum(theirs) / len(scored) if scored else None,
                     "ours": sum(ours) / len(scored) if scored else None,
                     "both": pairs.count((True, True)), "only_ours": pairs.count((True, False)),
                     "only_theirs": pairs.count((False, True)), "neither": pairs.count((False, False))})
    return rows


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def answers_markdown(records: list[dict], columns: dict[str, str]) -> str:
    kinds = by_kind(records)
    lines = ["| kind | questions | right | cannot tell | accuracy |", "|---|---|---|---|---|"]
    lines += [f"| {k['kind']} | {k['questions']} | {k['right']} | {k['cannot_tell']} | {_pct(k['accuracy'])} |"
              for k in kinds]
    right, declined = sum(k["right"] for k in kinds), sum(k["cannot_tell"] for k in kinds)
    n = len(records)
    lines.append(f"| all | {n} | {right} | {declined} | {_pct(right / n if n else None)} |")
    lines += ["", "| published model | questions | theirs | ours | both right | only ours | only theirs | neither |",
              "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {p['model']} | {p['questions']} | {_pct(p['theirs'])} | {_pct(p['ours'])} | {p['both']} | "
              f"{p['only_ours']} | {p['only_theirs']} | {p['neither']} |" for p in against_published(records, columns)]
    return "\n".join(lines) + "\n"


def write_answers(out: Path, records: list[dict], columns: dict[str, str]) -> str:
    """``answers.json`` and ``answers.md`` in ``out``; returns the markdown."""
    from recon4d.io.atomic import write_json, write_text

    table = answers_markdown(records, columns)
    write_text(out / "answers.md", table)
    write_json(out / "answers.json", {"questions": records, "kinds": by_kind(records),
                                      "published": against_published(records, columns)})
    return table
