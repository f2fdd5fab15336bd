"""`recon4d bench davis`: fit every sequence of a DAVIS-layout folder and score the fits on real video.

Why a benchmark of its own: synthetic scenes prove the optimiser, but users run DAVIS-like clips,
and what breaks there (a camera solve, a frame with no tracks, a slow 100-frame clip) shows only
when every sequence is fitted the same way. The fits go through ``recon4d batch`` (one Ray task at
a time, using every core), so the benchmark is resumable the way a batch is: finished scenes are
skipped, a killed run loses at most the scene in progress, and a failing scene never stops the
others. Every 8th frame is held out of the fit (``FitConfig.holdout_every``), so the held-out PSNR
measures the 4D model rather than memorised inputs. The geometric answerer is run afresh on every
call (seconds), so changing only the answerer re-answers without re-fitting.

Per sequence: status (ok / error / crash), seconds, peak memory, training and held-out PSNR, where the
training-view error is (moving objects, background, uncovered pixels: :mod:`recon4d.bench.diagnose`,
computed afresh from the fit like the answers), the camera solve's own numbers, the answerer's accuracy on the sequence's VLM4D questions and the
published VLMs' accuracy on the same questions. Written as ``bench.md``, ``bench.csv`` and
``bench.json`` in ``--out``, with every question's record and the per-kind table in ``answers.json`` and
``answers.md`` (:mod:`recon4d.bench.answers`); the last lines printed are ``key=value``.
``--config.*`` options (as in ``recon4d fit``) change the preset's fit config, e.g. for a schedule A/B
into another ``--out``; ``fit_config.json`` there records what the fits were made with.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import sys
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
PUBLISHED_COLUMNS = {"gemini-2.5-pro (do)": "gemini-2.5-pro-preview-06-05_1fps:do",
                     "gpt-4o (cot)": "gpt-4o_32frame:cot",
                     "internvideo2-8b (cot)": "InternVideo2-Chat-8B_1fps:cot"}
"""The published models shown beside the answerer: the best on these questions, GPT-4o, and the
reference experiment's InternVideo2 (every model's accuracy is in bench.json)."""
DIAGNOSIS = ("psnr_static", "psnr_dynamic", "dynamic_px", "dynamic_err", "uncovered", "static_shift_px",
             "static_edge_err")
"""Where the training-view error is (:func:`recon4d.bench.diagnose.error_split`)."""
TARGET_TRAIN_DB, TARGET_WORST_DB = 27.0, 22.0
"""The fit-quality bars a clip is counted against (training-view PSNR, its worst frame): the counts of clips at
or above them are printed with the totals, so a run says how many clips reach them, not only the mean."""


@dataclass
class BenchDavisConfig:
    """Fit and score every sequence of a DAVIS-layout folder (resumable; offline). Every --config.* option of
    recon4d fit (--config.steps.joint 1800, say; see recon4d fit --help) changes the fits' config too."""

    data: Path = SHARED / "davis"
    """DAVIS-layout folder: <seq>/JPEGImages/*.jpg (and Annotations/ where there are masks)."""
    out: Path | None = None
    """Scene folders and the tables (default: out/bench-davis/<preset>[-quick][-priors])."""
    preset: str = "auto"
    """Fit preset (auto: davis on a GPU, cpu-preview without)."""
    sequences: tuple[str, ...] = ()
    """Only these sequences (default: all)."""
    quick: bool = False
    """Minutes, not hours: the `test` preset (fewer per-frame steps) on the first 16 frames at 240 px."""
    spread: bool = False
    """With --quick: the 16 frames spread evenly over each clip instead of its first 16. The questions are
    about the whole clip, so the answers are nearer a full fit's; the fits are harder (2.5-6.5 source frames
    apart), so their PSNR is lower."""
    stop_after: Literal["priors"] | None = None
    """priors: frames, cameras and masks only (the camera columns, no fit)."""
    holdout_every: int = 8
    """Hold out every k-th frame of the fit (0: none); the held-out PSNR is scored on those frames."""
    score_only: bool = False
    """Fit nothing: score the sequences whose fits have ended so far (of a run still going, or stopped), and
    leave the others out of the tables."""
    qa: Path = SHARED / "vlm4d" / "vlm4d_real_mc_davis.json"
    """VLM4D questions, matched to sequences by the video's file name."""
    published: Path = SHARED / "vlm4d" / "published_correct_davis_dev.csv"
    """Per question, whether each published VLM got it right."""


def _plan(cfg: BenchDavisConfig, config=None):
    """(scene specs, fit config, prior options, output folder) for this run; ``config`` (the command
    line's ``--config.*`` over :func:`fit_config`) replaces the preset's fit config."""
    from recon4d.batch.inputs import discover
    from recon4d.errors import UserError
    from recon4d.fit.presets import preset_prior_options

    if not cfg.data.is_dir():
        raise UserError(f"{cfg.data} is not a folder of DAVIS sequences (pass --data DIR)")
    specs = discover(cfg.data)
    if cfg.sequences:
        unknown = sorted(set(cfg.sequences) - {s.name for s in specs})
        if unknown:
            raise UserError(f"no sequence {', '.join(unknown)} in {cfg.data}")
        specs = [s for s in specs if s.name in cfg.sequences]
    if cfg.spread and not cfg.quick:
        raise UserError("--spread spreads the 16 frames of --quick over each clip; pass it with --quick")
    config = config or fit_config(cfg)
    preset = _preset(cfg)
    options = preset_prior_options(preset)  # the preset's [priors] table (davis: native 854 px)
    if cfg.quick:
        options = dataclasses.replace(options, max_frames=16, spread=cfg.spread, long_side=240)
    if cfg.quick:
        mode = "test-quick-spread" if cfg.spread else "test-quick"
    else:
        mode = ("davis" if _has_gpu() else "cpu-preview") if preset == "auto" else preset
    out = cfg.out or Path("out") / "bench-davis" / (mode + ("-priors" if cfg.stop_after else ""))
    return specs, config, options, out


def _preset(cfg: BenchDavisConfig) -> str:
    """The preset a run starts from: ``test`` with ``--quick``, else ``--preset``."""
    return "test" if cfg.quick else cfg.preset


def fit_config(cfg: BenchDavisConfig):
    """The fit config the bench runs: the preset's (``test`` with ``--quick``, its per-frame stages
    shortened) with the bench's held-out frames."""
    from recon4d.errors import UserError
    from recon4d.fit.presets import resolve_preset

    try:
        config = dataclasses.replace(resolve_preset(_preset(cfg)), holdout_every=cfg.holdout_every)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if cfg.quick:  # the per-frame stages dominate a short schedule: a few steps each still exercise them
        config.steps = dataclasses.replace(config.steps, motion=4, cameras=5, settle=50)
    return config


def parse(argv: list[str]):
    """(bench options, fit config): the bench's options, then ``--config.*`` overrides (as in ``recon4d
    fit``) over :func:`fit_config` of those options, so that a schedule A/B is two bench runs."""
    from recon4d.errors import UserError
    from recon4d.fit.trainer import FitConfig

    cfg, rest = tyro.cli(BenchDavisConfig, args=argv, prog="recon4d bench davis", return_unknown_args=True)
    if not rest:
        return cfg, None
    unknown = [a for a in rest if a.startswith("-") and not a.startswith("--config.")]
    if unknown:
        raise UserError(f"recon4d bench davis: unknown option {unknown[0]} (see --help)")
    Overrides = dataclasses.make_dataclass("Overrides", [("config", FitConfig)])  # the type itself, not a name
    return cfg, tyro.cli(Overrides, args=rest, prog="recon4d bench davis",
                         default=Overrides(config=fit_config(cfg))).config


def guard_config(out: Path, config) -> None:
    """Record the fit config of a bench folder's fits; refuse to add fits made with another one.

    Why: the bench skips finished scenes, so a run with other ``--config.*`` values into the same
    ``--out`` would mix two schedules in one table without a word."""
    from recon4d.errors import UserError
    from recon4d.io.atomic import write_json

    path = out / "fit_config.json"
    current = json.loads(json.dumps(dataclasses.asdict(config), default=str))
    if path.exists() and json.loads(path.read_text()) != current:
        raise UserError(f"{out} holds fits made with another fit config ({path}); pass a new --out")
    out.mkdir(parents=True, exist_ok=True)
    write_json(path, current)


def _has_gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _questions(path: Path) -> dict[str, list[dict]]:
    """VLM4D entries by sequence name (the video URL's file stem)."""
    if not path.exists():
        return {}
    by_seq: dict[str, list[dict]] = {}
    for entry in json.loads(path.read_text()):
        by_seq.setdefault(Path(str(entry.get("video", ""))).stem, []).append(entry)
    return by_seq


def _published(path: Path) -> dict[str, dict[str, int]]:
    """Question id -> {model column: 1 right / 0 wrong}."""
    if not path.exists():
        return {}
    with open(path, newline="") as f:
        return {row.pop("id"): {k: int(v) for k, v in row.items() if k != "sequence" and v != ""}
                for row in csv.DictReader(f)}


def _answer(scene_dir: Path, entries: list[dict]) -> tuple[list[dict], str | None]:
    """The geometric answerer's records for ``entries`` (none when the scene has no fit), and the error it
    crashed with, if it did: one scene's bug must not hide every other scene's row. The traceback goes
    to the scene's log."""
    from recon4d.grounding import answer_file
    from recon4d.scene_folder import SceneFolder

    if not entries or not SceneFolder(scene_dir).has_fit():
        return [], None
    try:
        return answer_file(scene_dir, entries)[0], None
    except Exception as exc:  # noqa: BLE001 - reported in the row, traceback in the log
        with open(scene_dir / "log.txt", "a") as log:
            log.write("bench davis: answering failed\n" + traceback.format_exc())
        return [], f"{type(exc).__name__}: {exc}"


def _diagnosis(scene_dir: Path, metrics: dict) -> dict:
    """``diagnose.error_split`` over the fit's training frames (nothing before a fit has scored its frames);
    a failure is logged to the scene's log and leaves the columns empty, as a failed answer does."""
    from recon4d.bench.diagnose import error_split

    per_frame = metrics.get("psnr_per_frame")
    if not per_frame:
        return {}
    held = set(metrics.get("heldout_frames", []))
    try:
        return error_split(scene_dir, [t for t in range(len(per_frame)) if t not in held])
    except Exception:  # noqa: BLE001 - a diagnosis must not cost the row
        with open(scene_dir / "log.txt", "a") as log:
            log.write("bench davis: the error split failed\n" + traceback.format_exc())
        return {}


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _largest_turn(scene_dir: Path) -> float | None:
    """The solved camera's largest frame-to-frame rotation in degrees (None before the camera exists)."""
    import numpy as np

    from recon4d.priors.camera_sanity import frame_rotations_deg

    views = _read_json(scene_dir / "priors" / "camera.json").get("viewmats")
    return float(frame_rotations_deg(np.array(views)).max()) if views and len(views) > 1 else None


def _row(name: str, rec, scene_dir: Path, answers: list[dict], answer_error: str | None,
         published: dict[str, dict[str, int]]) -> dict:
    metrics = _read_json(scene_dir / "metrics.json")
    report = _read_json(scene_dir / "priors" / "report.json")
    cam = report.get("camera_info", {})
    status = "ok" if rec.status == "done" and answer_error is None else (rec.error_kind or "crash")
    row = {"sequence": name, "status": status, "frames": report.get("frames"),
           "seconds": rec.durations[-1] if rec.durations else None, "peak_mib": metrics.get("peak_rss_mib"),
           "psnr_train": metrics.get("psnr_train"), "psnr_train_min": metrics.get("psnr_train_min"),
           "psnr_heldout": metrics.get("psnr_heldout"), "psnr_heldout_min": metrics.get("psnr_heldout_min"),
           **{key: None for key in DIAGNOSIS}, **_diagnosis(scene_dir, metrics),
           "camera": report.get("motion_type"), "fov_deg": report.get("fov_deg"),
           "reproj_px": cam.get("reproj_px_median"), "max_turn_deg": _largest_turn(scene_dir),
           "camera_refused": len(cam.get("rejected_solves", [])), "questions": len(answers),
           "right": sum(bool(a.get("correct")) for a in answers),
           "cannot_tell": sum(a.get("letter") is None for a in answers),
           "stage_seconds": metrics.get("stage_seconds", {})}
    for label, column in PUBLISHED_COLUMNS.items():
        marks = [published[a["id"]][column] for a in answers if column in published.get(a["id"], {})]
        row[label] = sum(marks) / len(marks) if marks else None
    if answer_error is not None:
        row["error"] = f"stopped in answering: {answer_error} (log: {scene_dir / 'log.txt'})"
    elif status != "ok":
        row["error"] = f"stopped in {rec.failed_stage or 'priors'}: {rec.error} (log: {rec.log})"
    return row


def _mean(values) -> float:
    values = [v for v in values if isinstance(v, (int, float)) and math.isfinite(v)]
    return sum(values) / len(values) if values else float("nan")


def _totals(rows: list[dict], answers: list[dict], published: dict[str, dict[str, int]]) -> dict:
    total = {"sequence": "all", "status": f"{sum(r['status'] == 'ok' for r in rows)}/{len(rows)} ok",
             "frames": sum(r["frames"] or 0 for r in rows), "seconds": sum(r["seconds"] or 0 for r in rows),
             "peak_mib": max((r["peak_mib"] or 0 for r in rows), default=0)}
    for key in ("psnr_train", "psnr_train_min", "psnr_heldout", "psnr_heldout_min", *DIAGNOSIS, "reproj_px"):
        total[key] = _mean(r[key] for r in rows)
    total.update(questions=len(answers), right=sum(bool(a.get("correct")) for a in answers),
                 cannot_tell=sum(a.get("letter") is None for a in answers))
    columns = sorted({c for a in answers for c in published.get(a["id"], {})})
    total["published"] = {c: _mean(published[a["id"]][c] for a in answers if c in published.get(a["id"], {}))
                          for c in columns}
    for label, column in PUBLISHED_COLUMNS.items():
        total[label] = total["published"].get(column)
    fitted = [r for r in rows if r["psnr_train"] is not None]
    total["fitted"] = len(fitted)
    total["train_at_target"] = sum(r["psnr_train"] >= TARGET_TRAIN_DB for r in fitted)
    total["worst_at_target"] = sum((r["psnr_train_min"] or 0) >= TARGET_WORST_DB for r in fitted)
    total["seconds_per_fit"] = _mean(r["seconds"] for r in fitted)
    total["stage_seconds"] = stage_totals(rows)
    return total


def stage_totals(rows: list[dict]) -> dict[str, float]:
    """Seconds per stage summed over the fits, in the order the fits recorded their stages: where a run's
    time goes, which is what a speed change has to move."""
    totals: Counter[str] = Counter()
    for row in rows:
        totals.update(row.get("stage_seconds") or {})
    return dict(totals)


COLUMNS = ("sequence", "status", "frames", "seconds", "peak_mib", "psnr_train", "psnr_train_min", "psnr_heldout",
           "psnr_heldout_min", *DIAGNOSIS, "camera", "fov_deg", "reproj_px", "max_turn_deg", "camera_refused", "questions", "right",
           "cannot_tell", *PUBLISHED_COLUMNS)


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 1 else f"{value:.1f}" if abs(value) >= 100 else f"{value:.2f}"
    return str(value)


def markdown(rows: list[dict], total: dict) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in COLUMNS) + " |" for r in [*rows, total]]
    errors = [f"- {r['sequence']}: {r['error']}" for r in rows if "error" in r]
    stages = total.get("stage_seconds") or {}
    spent = sum(stages.values())
    if spent > 0:
        lines += ["", "| stage | seconds | share |", "|---|---|---|"]
        lines += [f"| {stage} | {seconds:.0f} | {seconds / spent:.1%} |" for stage, seconds in stages.items()]
    if total.get("fitted"):
        lines += ["", f"{total['fitted']} fits: training PSNR >= {TARGET_TRAIN_DB:g} dB on {total['train_at_target']}, "
                      f"worst frame >= {TARGET_WORST_DB:g} dB on {total['worst_at_target']}; "
                      f"{total['seconds_per_fit']:.0f} s a fit on average"]
    return "\n".join(lines + ([""] + errors if errors else [])) + "\n"


def write_tables(out: Path, rows: list[dict], total: dict) -> str:
    from recon4d.io.atomic import write_json, write_text

    table = markdown(rows, total)
    write_text(out / "bench.md", table)
    write_json(out / "bench.json", {"sequences": rows, "total": total})
    lines = [",".join(COLUMNS)] + [",".join(_cell(r.get(c)).replace(",", ";") for c in COLUMNS) for r in [*rows, total]]
    write_text(out / "bench.csv", "\n".join(lines) + "\n")
    return table


def main(argv: list[str]) -> int:
    from recon4d.batch.manifest import Manifest
    from recon4d.batch.runner import BatchOptions, run_batch
    from recon4d.bench.answers import question_records, write_answers
    from recon4d.errors import UserError

    cfg, overrides = parse(argv)
    specs, config, options, out = _plan(cfg, overrides)
    cores = os.cpu_count() or 1
    opts = BatchOptions(out=out, config=config, prior_options=options, retries=0, cpus_per_scene=cores,
                        num_cpus=cores, stop_after=cfg.stop_after, poll_seconds=5.0)
    if cfg.score_only:
        manifest = Manifest.load(out)
        ended = [s for s in specs if s.name in manifest.scenes and manifest.scenes[s.name].status in ("done", "failed")]
        if not ended:
            raise UserError(f"no fit has ended in {out} yet; run `recon4d bench davis` without --score-only to fit")
        print(f"scoring the {len(ended)} of {len(specs)} sequences whose fits have ended in {out}")
        specs = ended
    else:
        guard_config(out, config)
        manifest = run_batch(specs, opts)
    questions, published = _questions(cfg.qa), _published(cfg.published)
    if not cfg.stop_after and not cfg.qa.exists():  # the default is ../shared beside the checkout: not in a worktree
        print(f"bench davis: no questions at {cfg.qa}, so no answers are scored; pass --qa (and --published)",
              file=sys.stderr)
    rows, records = [], []
    for spec in specs:
        answers, answer_error = ([], None) if cfg.stop_after else _answer(out / spec.name,
                                                                          questions.get(spec.name, []))
        records += question_records(spec.name, answers, published)
        rows.append(_row(spec.name, manifest.scenes[spec.name], out / spec.name, answers, answer_error, published))
    total = _totals(rows, records, published)
    print(write_tables(out, rows, total))
    if records:
        print(write_answers(out, records, PUBLISHED_COLUMNS))
    print(f"tables: {out / 'bench.md'} (also .csv, .json)" + (f"; per question: {out / 'answers.md'}, answers.json"
                                                              if records else ""))
    print(f"crashes={sum(r['status'] == 'crash' for r in rows)}")
    print(f"errors={sum(r['status'] == 'error' for r in rows)}")
    print(f"psnr_train={total['psnr_train']:.3f}")
    print(f"psnr_heldout={total['psnr_heldout']:.3f}")
    print(f"train_{TARGET_TRAIN_DB:g}db={total['train_at_target']}/{total['fitted']}")
    print(f"worst_frame_{TARGET_WORST_DB:g}db={total['worst_at_target']}/{total['fitted']}")
    print(f"answer_accuracy={total['right'] / total['questions'] if total['questions'] else float('nan'):.4f}")
    print(f"cannot_tell_rate={total['cannot_tell'] / total['questions'] if total['questions'] else float('nan'):.4f}")
    print(f"seconds={total['seconds']:.0f}")
    print(f"seconds_per_fit={total['seconds_per_fit']:.0f}")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
