"""Results of a VLM4D run: one JSONL line per (question, modality, prompt mode), and the summary tables.

The JSONL is append-only and is the resume point: a rerun reads it and skips
every (id, modality, prompt mode) already answered. The summary follows the
reference result's layout (rows: prompt mode x modality; columns: accuracy, n,
95% bootstrap interval), then the same per question type, as markdown and CSV.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from recon4d.io.atomic import atomic_path

RESULTS = "results.jsonl"
SUMMARY_MD = "summary.md"
SUMMARY_CSV = "summary.csv"
BOOTSTRAP = 1000


class ResultLog:
    """The run's JSONL file: what is done, and appending one answered record at a time."""

    def __init__(self, out: Path):
        self.path = Path(out) / RESULTS
        self.records = [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()] \
            if self.path.exists() else []
        self._done = {self.key(r) for r in self.records}

    @staticmethod
    def key(record: dict) -> tuple[str, str, str]:
        return record["id"], record["modality"], record["prompt_mode"]

    def done(self, qid: str, modality: str, mode: str) -> bool:
        return (qid, modality, mode) in self._done

    def append(self, record: dict) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
        self.records.append(record)
        self._done.add(self.key(record))


def bootstrap_interval(correct: list[bool], seed: int = 0) -> tuple[float, float]:
    """95% percentile bootstrap interval of the accuracy (seeded, so tables are reproducible)."""
    x = np.asarray(correct, dtype=float)
    if len(x) == 0:
        return float("nan"), float("nan")
    means = x[np.random.default_rng(seed).integers(0, len(x), (BOOTSTRAP, len(x)))].mean(1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def summary_rows(records: list[dict]) -> list[dict]:
    """Accuracy rows: every (mode, modality) over all questions (type "all"), then per question type."""
    groups: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    for r in records:
        for qtype in ("all", r["question_type"]):
            groups[(r["prompt_mode"], r["modality"], qtype)].append(bool(r["correct"]))
    rows = []
    for (mode, modality, qtype), correct in sorted(groups.items(), key=lambda kv: (kv[0][2] != "all", kv[0])):
        low, high = bootstrap_interval(correct)
        rows.append({"prompt_mode": mode, "modality": modality, "question_type": qtype, "n": len(correct),
                     "accuracy": float(np.mean(correct)), "ci_low": low, "ci_high": high})
    return rows


def _markdown(rows: list[dict], title: str) -> str:
    lines = [f"## {title}", "", "| prompt | modality | type | accuracy % | n | 95% CI |", "|---|---|---|---:|---:|---|"]
    lines += [f"| {r['prompt_mode']} | {r['modality']} | {r['question_type']} | {100 * r['accuracy']:.1f} | "
              f"{r['n']} | {100 * r['ci_low']:.1f}–{100 * r['ci_high']:.1f} |" for r in rows]
    return "\n".join(lines)


def write_summary(out: Path, records: list[dict], settings: dict) -> str:
    """Write summary.md and summary.csv; returns the markdown."""
    rows = summary_rows(records)
    overall = [r for r in rows if r["question_type"] == "all"]
    by_type = [r for r in rows if r["question_type"] != "all"]
    md = "\n\n".join([_markdown(overall, "Accuracy by prompt mode and modality"),
                      _markdown(by_type, "Accuracy by question type"),
                      "Settings: `" + json.dumps(settings, sort_keys=True) + "`"]) + "\n"
    out = Path(out)
    with atomic_path(out / SUMMARY_MD) as tmp:
        tmp.write_text(md, encoding="utf-8")
    with atomic_path(out / SUMMARY_CSV) as tmp, tmp.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["prompt_mode"])
        writer.writeheader()
        writer.writerows(rows)
    return md
