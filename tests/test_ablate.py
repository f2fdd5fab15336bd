"""`recon4d ablate` end to end on two tiny synthetic scenes with the tiny offline VLM.

Checks the artefacts (table, CSV, chart, per-question JSONL, global renders, the VLM
teacher distilled in each scene) and that a second run redoes no step.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest
from PIL import Image

os.environ.setdefault("RAY_DISABLE_IMPORT_WARNING", "1")
pytest.importorskip("ray")
pytest.importorskip("matplotlib")

QUESTIONS_PER_SCENE = 3
MODALITIES = ("raw", "global-video", "feature-field", "raw+cues", "geometric")
REFERENCED = MODALITIES[:3]  # the modalities Feature4X published numbers for
CELLS = 10  # 5 modalities x 2 prompt modes


@pytest.fixture(scope="module")
def ablation_inputs(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    """(videos folder with two synth scenes, a question file over both, scene names)."""
    from tests.fitted import synth_scene

    root = tmp_path_factory.mktemp("ablate_src")
    scenes = [synth_scene(root, "--seed", str(seed)) for seed in (4, 5)]
    questions = [q for s in scenes for q in json.loads((s / "qa.json").read_text())[:QUESTIONS_PER_SCENE]]
    qa = root.parent / f"{root.name}_qa.json"
    qa.write_text(json.dumps(questions))
    return root, qa, [s.name for s in scenes]


def _ablate(videos: Path, qa: Path, out: Path) -> int:
    from recon4d.commands import ablate

    return ablate.main(["--qa", str(qa), "--videos", str(videos), "--out", str(out), "--num-cpus", "2",
                        "--preset", "test", "--priors", "gt", "--config.steps.static", "1",
                        "--config.steps.scaffold", "0", "--config.steps.motion", "0", "--config.steps.joint", "1",
                        "--config.steps.features", "5",
                        "--max-new-tokens-cot", "8", "--max-new-tokens-do", "4"])


def test_ablate_end_to_end_and_resume(ablation_inputs, tmp_path):
    videos, qa, names = ablation_inputs
    out = tmp_path / "ablation"
    assert _ablate(videos, qa, out) == 0

    vqa = out / "vqa"
    records = [json.loads(line) for line in (vqa / "results.jsonl").read_text().splitlines()]
    assert len(records) == len(names) * QUESTIONS_PER_SCENE * CELLS
    assert {(r["modality"], r["prompt_mode"]) for r in records} == {
        (m, p) for m in MODALITIES for p in ("cot", "do")}
    rows = list(csv.DictReader((vqa / "ablation.csv").open()))
    assert [(r["prompt_mode"], r["modality"]) for r in rows] == [
        (p, m) for p in ("cot", "do") for m in MODALITIES]
    for row in rows:  # each cell's accuracy is the mean of its JSONL records
        cell = [r["correct"] for r in records if (r["prompt_mode"], r["modality"]) == (row["prompt_mode"], row["modality"])]
        assert int(row["n"]) == len(cell) == len(names) * QUESTIONS_PER_SCENE
        assert float(row["accuracy_pct"]) == pytest.approx(round(100 * sum(cell) / len(cell), 1))
        assert (float(row["reference_pct"]) > 0) if row["modality"] in REFERENCED else row["reference_pct"] == ""
    table = (vqa / "ablation.md").read_text()
    assert table.count("\n| cot |") == len(MODALITIES) and table.count("\n| do |") == len(MODALITIES)
    assert "### cot: accuracy % (n) by question type" in table and "| question type | " + " | ".join(MODALITIES) in table
    with Image.open(vqa / "ablation.png") as png:
        assert png.format == "PNG" and png.width > 400 and png.height > 300
    for name in names:
        scene = out / "scenes" / name
        assert (scene / "renders" / "global" / "rgb.mp4").stat().st_size > 0
        assert (scene / "priors" / "teachers" / "tiny.safetensors").exists()
    manifest = json.loads((out / "scenes" / "batch.json").read_text())
    assert all(manifest["scenes"][n]["status"] == "done" for n in names)

    stamps = {p: p.stat().st_mtime_ns for p in [vqa / "results.jsonl",
                                                 *(out / "scenes" / n / "metrics.json" for n in names),
                                                 *(out / "scenes" / n / "renders" / "global" / "rgb.mp4" for n in names)]}
    assert _ablate(videos, qa, out) == 0
    assert {p: p.stat().st_mtime_ns for p in stamps} == stamps  # no refit, no re-render, nothing answered again
    assert (vqa / "ablation.png").exists()


def test_only_questions_on_fitted_scenes_are_evaluated(tmp_path):
    """A scene that failed to fit drops out of every modality alike (raw could answer it, the others not)."""
    from recon4d.ablate.run import AblationPlan, questions_on
    from recon4d.batch.runner import BatchOptions

    entries = [{"id": f"q{i}", "video": f"{scene}/video.mp4"} for i, scene in enumerate(["a", "b", "a"])]
    entries.append("not a question")  # malformed entries stay for the evaluation to report
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(entries))
    plan = AblationPlan(qa=qa, videos=tmp_path, out=tmp_path / "out", batch=BatchOptions(out=tmp_path, config=None),
                        log=lambda m: None)
    assert questions_on(plan, ["a", "b"]) == qa
    kept = json.loads(questions_on(plan, ["a"]).read_text())
    assert [e["id"] if isinstance(e, dict) else e for e in kept] == ["q0", "q2", "not a question"]
