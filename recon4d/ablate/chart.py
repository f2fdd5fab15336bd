"""The ablation's summary: accuracy per prompt mode x modality beside the reference, as markdown, CSV, PNG.

The markdown also has accuracy per question type, one column per modality,
``geometric`` (the geometric answerer, no VLM) among them.

Why beside the reference: the point of the ablation is to compare with Feature4X's
VLM4D DAVIS result (InternVideo2; docs/design.md), so every row carries the published
number for the same cell. The accuracies and intervals come from
``vqa_bridge.report.summary_rows`` so this table and ``summary.md`` never disagree.

Why the covered share: the rendered modalities are only as good as what their camera
shows, so the rows of the two that look through the global camera carry the share of
the frame its content covers (mean over the cell's scenes), and a per-scene list
gives each scene's FoV and coverage.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

from matplotlib.figure import Figure

from recon4d.io.atomic import atomic_path, write_text
from vqa_bridge.modalities import MODALITIES

# Feature4X on the VLM4D DAVIS subset with InternVideo2-Chat-8B, accuracy % (docs/design.md).
REFERENCE = {("cot", "raw"): 36.0, ("cot", "global-video"): 32.7, ("cot", "feature-field"): 37.4,
             ("do", "raw"): 24.3, ("do", "global-video"): 23.8, ("do", "feature-field"): 29.0}
MODE_ORDER = ("cot", "do")
COLUMNS = ("prompt_mode", "modality", "n", "accuracy_pct", "ci_low_pct", "ci_high_pct", "reference_pct",
           "coverage_pct")
GLOBAL_VIEW = ("global-video", "feature-field")  # the modalities rendered through the global camera


def ablation_rows(records: list[dict], views: dict[str, dict] | None = None) -> list[dict]:
    """One row per (prompt mode, modality) answered, in the reference table's order.

    ``views``: the global render's summary per scene; the global-view rows get ``coverage_pct``,
    the mean covered share over the scenes their questions are on.
    """
    from vqa_bridge.report import summary_rows

    cells = {(r["prompt_mode"], r["modality"]): r for r in summary_rows(records) if r["question_type"] == "all"}
    order = {m: i for i, m in enumerate(MODE_ORDER)} | {m: i for i, m in enumerate(MODALITIES)}
    rows = []
    for mode, modality in sorted(cells, key=lambda k: (order.get(k[0], 9), order.get(k[1], 9), k)):
        r = cells[mode, modality]
        rows.append({"prompt_mode": mode, "modality": modality, "n": r["n"],
                     "accuracy_pct": round(100 * r["accuracy"], 1), "ci_low_pct": round(100 * r["ci_low"], 1),
                     "ci_high_pct": round(100 * r["ci_high"], 1),
                     "reference_pct": REFERENCE.get((mode, modality)),
                     "coverage_pct": _coverage(records, mode, modality, views or {})})
    return rows


def _coverage(records: list[dict], mode: str, modality: str, views: dict[str, dict]) -> float | None:
    if modality not in GLOBAL_VIEW:
        return None
    scenes = {r["scene"] for r in records if (r["prompt_mode"], r["modality"]) == (mode, modality)}
    shares = [views[s]["coverage"] for s in scenes if "coverage" in views.get(s, {})]
    return round(100 * sum(shares) / len(shares), 1) if shares else None


def views_markdown(views: dict[str, dict]) -> str:
    """Per scene: the global camera's horizontal FoV and the share of the frame its content covers."""
    lines = ["### global view: FoV and share of the frame covered (alpha > 0.5)", "",
             "| scene | FoV deg | covered % (mean) | covered % (worst frame) |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {v['fov_deg']:.1f} | {100 * v['coverage']:.1f} | {100 * v['coverage_min']:.1f} |"
              for name, v in sorted(views.items()) if "coverage" in v]
    return "\n".join(lines) + "\n"


def markdown(rows: list[dict], header: str) -> str:
    columns = "| prompt | modality | n | accuracy % | 95% CI | Feature4X (InternVideo2, DAVIS) % | frame covered % |"
    lines = [header, "", columns, "|---|---|---:|---:|---|---:|---:|"]
    lines += [f"| {r['prompt_mode']} | {r['modality']} | {r['n']} | {r['accuracy_pct']:.1f} | "
              f"{r['ci_low_pct']:.1f}–{r['ci_high_pct']:.1f} | {_cell(r['reference_pct'])} | "
              f"{_cell(r['coverage_pct'])} |" for r in rows]
    return "\n".join(lines) + "\n"


def _cell(value: float | None) -> str:
    return "" if value is None else format(value, ".1f")


def by_type_markdown(records: list[dict]) -> str:
    """Accuracy % (n) per question type, one table per prompt mode, one column per modality."""
    from vqa_bridge.report import summary_rows

    cells = {(r["prompt_mode"], r["question_type"], r["modality"]): r
             for r in summary_rows(records) if r["question_type"] != "all"}
    parts = []
    for mode in [m for m in MODE_ORDER if any(k[0] == m for k in cells)]:
        modalities = [m for m in MODALITIES if any(k[0] == mode and k[2] == m for k in cells)]
        lines = [f"### {mode}: accuracy % (n) by question type", "",
                 "| question type | " + " | ".join(modalities) + " |", "|---|" + "---:|" * len(modalities)]
        for qtype in sorted({k[1] for k in cells if k[0] == mode}):
            row = [cells.get((mode, qtype, m)) for m in modalities]
            lines.append(f"| {qtype} | " + " | ".join("" if r is None else f"{100 * r['accuracy']:.1f} ({r['n']})"
                                                      for r in row) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def bar_chart(rows: list[dict], path: Path, title: str) -> Path:
    """Grouped bars (prompt mode groups, one bar per modality) with 95% CI whiskers and reference ticks."""
    modes = [m for m in MODE_ORDER if any(r["prompt_mode"] == m for r in rows)]
    modalities = [m for m in MODALITIES if any(r["modality"] == m for r in rows)]
    fig = Figure(figsize=(6.4, 4.0), dpi=120)
    ax = fig.subplots()
    width = 0.8 / max(len(modalities), 1)
    for j, modality in enumerate(modalities):
        xs, ys, errs, refs = [], [], [[], []], []
        for i, mode in enumerate(modes):
            row = next((r for r in rows if r["prompt_mode"] == mode and r["modality"] == modality), None)
            if row is None:
                continue
            x = i + (j - (len(modalities) - 1) / 2) * width
            xs.append(x)
            ys.append(row["accuracy_pct"])
            errs[0].append(row["accuracy_pct"] - row["ci_low_pct"])
            errs[1].append(row["ci_high_pct"] - row["accuracy_pct"])
            if row["reference_pct"] is not None:
                refs.append((x, row["reference_pct"]))
        ax.bar(xs, ys, width * 0.9, yerr=errs, capsize=3, label=modality)
        if refs:
            ax.scatter(*zip(*refs), marker="_", s=300, color="black", zorder=3,
                       label="Feature4X reference" if j == 0 else None)
    ax.set_xticks(range(len(modes)), [{"cot": "chain of thought", "do": "direct output"}.get(m, m) for m in modes])
    ax.set_ylabel("accuracy %")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    with atomic_path(path) as tmp:
        tmp.write_bytes(buf.getvalue())
    return path


def write_ablation(folder: Path, records: list[dict], header: str,
                   views: dict[str, dict] | None = None) -> dict[str, Path]:
    """``ablation.md``, ``ablation.csv`` and ``ablation.png`` in ``folder`` (beside results.jsonl);
    ``views``: the global render's summary per scene (FoV, covered share)."""
    rows = ablation_rows(records, views)
    folder = Path(folder)
    write_text(folder / "ablation.md", markdown(rows, header) + "\n" + by_type_markdown(records)
               + ("\n" + views_markdown(views) if views else ""))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    write_text(folder / "ablation.csv", buf.getvalue())
    return {"md": folder / "ablation.md", "csv": folder / "ablation.csv",
            "png": bar_chart(rows, folder / "ablation.png", header.lstrip("# "))}
