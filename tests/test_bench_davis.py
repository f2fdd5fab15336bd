"""`recon4d bench davis --quick` on one short real sequence: it fits, scores held-out frames, answers the
sequence's VLM4D questions beside the published models, writes its tables, and a second run re-answers
without re-fitting."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import shared_data

SEQUENCE = "motocross-jump"  # the shortest of the 25 (40 frames), with masks and 4 questions


def _bench(out, *extra) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "recon4d.cli", "bench", "davis", "--quick", "--sequences", SEQUENCE,
                           "--out", str(out), *extra], check=False, capture_output=True, text=True, timeout=1500)


def _last_values(stdout: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line and " " not in line)


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    davis = shared_data("davis", SEQUENCE).parent
    out = tmp_path_factory.mktemp("bench-davis")
    proc = _bench(out, "--data", str(davis))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc


def test_quick_bench_scores_the_sequence(bench_run):
    out, proc = bench_run
    values = _last_values(proc.stdout)
    assert values["crashes"] == "0" and values["errors"] == "0"
    table = json.loads((out / "bench.json").read_text())
    row = table["sequences"][0]
    assert row["sequence"] == SEQUENCE and row["status"] == "ok" and row["frames"] == 16
    metrics = json.loads((out / SEQUENCE / "metrics.json").read_text())
    held = metrics["heldout_frames"]
    assert held == [4, 12]  # every 8th frame, from the 4th
    per_frame = metrics["psnr_per_frame"]
    assert row["psnr_heldout"] == pytest.approx(sum(per_frame[t] for t in held) / len(held))
    trained = [p for t, p in enumerate(per_frame) if t not in held]
    assert row["psnr_train"] == pytest.approx(sum(trained) / len(trained))
    assert 12 < row["psnr_heldout"] < row["psnr_train"]  # a real render, and harder than the fitted frames
    assert float(values["psnr_heldout"]) == pytest.approx(row["psnr_heldout"], abs=1e-3)
    assert row["questions"] == 4 and 0 <= row["right"] <= 4
    assert float(values["answer_accuracy"]) == pytest.approx(row["right"] / 4, abs=1e-4)
    for label in ("gemini-2.5-pro (do)", "internvideo2-8b (cot)"):
        assert row[label] is not None and 0 <= row[label] <= 1
    assert row["camera"] and row["fov_deg"] > 0 and row["seconds"] > 0 and row["peak_mib"] > 0
    for name in ("bench.md", "bench.csv"):
        assert SEQUENCE in (out / name).read_text()
    answers = json.loads((out / "answers.json").read_text())
    assert len(answers["questions"]) == 4 and {q["sequence"] for q in answers["questions"]} == {SEQUENCE}
    assert sum(k["right"] for k in answers["kinds"]) == row["right"]
    assert float(values["cannot_tell_rate"]) == pytest.approx(row["cannot_tell"] / 4, abs=1e-4)


def test_second_run_re_answers_without_re_fitting(bench_run):
    out, _ = bench_run
    model = out / SEQUENCE / "model" / "scene.safetensors"
    before = model.stat().st_mtime_ns
    (out / "bench.json").unlink()
    again = _bench(out, "--data", str(shared_data("davis")))
    assert again.returncode == 0, again.stderr[-2000:]
    assert model.stat().st_mtime_ns == before
    assert json.loads((out / "bench.json").read_text())["sequences"][0]["questions"] == 4


def test_score_only_scores_what_has_ended_and_fits_nothing(bench_run, tmp_path):
    out, _ = bench_run
    model = out / SEQUENCE / "model" / "scene.safetensors"
    before = model.stat().st_mtime_ns
    scored = _bench(out, "--data", str(shared_data("davis")), "--score-only")
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert model.stat().st_mtime_ns == before and "scoring the 1 of 1 sequences" in scored.stdout
    assert json.loads((out / "bench.json").read_text())["sequences"][0]["sequence"] == SEQUENCE
    unasked = _bench(out, "--data", str(shared_data("davis")), "--score-only", "--qa", str(tmp_path / "none.json"))
    assert unasked.returncode == 0 and "no questions at" in unasked.stderr  # said, not a silent nan
    empty = _bench(tmp_path / "nothing", "--data", str(shared_data("davis")), "--score-only")
    assert empty.returncode == 2 and "no fit has ended" in empty.stderr and not (tmp_path / "nothing").exists()


def _fitted_row(name: str, train: float, worst: float, seconds: float, stages: dict[str, float]) -> dict:
    from recon4d.bench.davis import DIAGNOSIS

    return {"sequence": name, "status": "ok", "frames": 50, "seconds": seconds, "peak_mib": 1000.0,
            "psnr_train": train, "psnr_train_min": worst, "psnr_heldout": train - 1, "psnr_heldout_min": worst - 1,
            **{key: None for key in DIAGNOSIS}, "reproj_px": 0.2, "stage_seconds": stages}


def test_totals_count_the_clips_at_the_targets_and_add_up_the_stages():
    from recon4d.bench.davis import _totals, markdown

    rows = [_fitted_row("a", 27.5, 23.0, 300.0, {"priors": 30.0, "joint": 150.0}),
            _fitted_row("b", 26.9, 22.5, 500.0, {"priors": 50.0, "joint": 250.0, "settle": 100.0}),
            _fitted_row("c", 28.0, 21.0, 400.0, {"priors": 20.0, "joint": 100.0}),
            {**_fitted_row("d", 0, 0, 20.0, {}), "status": "error", "psnr_train": None, "psnr_train_min": None,
             "psnr_heldout": None, "psnr_heldout_min": None}]
    total = _totals(rows, [], {})
    assert total["fitted"] == 3  # the clip stopped in its priors is no fit
    assert total["train_at_target"] == 2 and total["worst_at_target"] == 2
    assert total["seconds_per_fit"] == pytest.approx(400.0)
    assert total["stage_seconds"] == {"priors": 100.0, "joint": 500.0, "settle": 100.0}
    table = markdown(rows, total)
    assert "| joint | 500 | 71.4% |" in table
    assert "3 fits: training PSNR >= 27 dB on 2, worst frame >= 22 dB on 2; 400 s a fit on average" in table
