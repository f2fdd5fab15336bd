"""The benchmark's answer tables: per kind and against each published model, from known records."""

from __future__ import annotations

from recon4d.bench.answers import (
    against_published,
    answers_markdown,
    by_kind,
    question_records,
)


def _records():
    answers = [  # kind, letter (None: cannot tell), correct
        {"id": "q1", "kind": "direction", "letter": "A", "correct": True},
        {"id": "q2", "kind": "direction", "letter": None, "correct": False},
        {"id": "q3", "kind": "direction", "letter": "B", "correct": False},
        {"id": "q4", "kind": "rotation", "letter": "C", "correct": True},
    ]
    published = {"q1": {"m": 1}, "q2": {"m": 1}, "q3": {"m": 0}, "q4": {"m": 0}}  # q4 also unscored by "n"
    return question_records("seq", answers, {**published, "q1": {"m": 1, "n": 0}})


def test_by_kind_counts_right_and_declined_per_kind():
    kinds = {k["kind"]: k for k in by_kind(_records())}
    assert kinds["direction"] == {"kind": "direction", "questions": 3, "right": 1, "cannot_tell": 1,
                                  "accuracy": 1 / 3}
    assert kinds["rotation"]["right"] == 1 and kinds["rotation"]["cannot_tell"] == 0
    assert [k["kind"] for k in by_kind(_records())] == ["direction", "rotation"]  # most frequent first


def test_against_published_splits_the_questions_four_ways():
    m, n = against_published(_records(), {"M": "m", "N": "n"})
    assert (m["questions"], m["theirs"], m["ours"]) == (4, 0.5, 0.5)
    assert (m["both"], m["only_ours"], m["only_theirs"], m["neither"]) == (1, 1, 1, 1)
    assert n["questions"] == 1 and n["only_ours"] == 1  # only the questions that model was scored on


def test_markdown_has_a_totals_row():
    table = answers_markdown(_records(), {"M": "m"})
    assert "| all | 4 | 2 | 1 | 50.0% |" in table and "| M | 4 | 50.0% | 50.0% | 1 | 1 | 1 | 1 |" in table


def test_the_benchmark_takes_the_presets_frames_and_priors_options(tmp_path):
    from PIL import Image

    from recon4d.bench.davis import BenchDavisConfig, _plan

    (tmp_path / "seq" / "JPEGImages").mkdir(parents=True)
    Image.new("RGB", (32, 24)).save(tmp_path / "seq" / "JPEGImages" / "00000.jpg")
    _, _, davis, _ = _plan(BenchDavisConfig(data=tmp_path, preset="davis"))
    _, _, preview, _ = _plan(BenchDavisConfig(data=tmp_path, preset="cpu-preview"))
    _, _, quick, _ = _plan(BenchDavisConfig(data=tmp_path, preset="davis", quick=True))
    assert (davis.long_side, preview.long_side) == (854, 480)  # davis's [priors] table; the default
    _, _, spread, _ = _plan(BenchDavisConfig(data=tmp_path, preset="davis", quick=True, spread=True))
    assert (quick.long_side, quick.max_frames, quick.spread) == (240, 16, False)
    assert (spread.long_side, spread.max_frames, spread.spread) == (240, 16, True)


def test_config_overrides_layer_over_the_benchs_fit_config_and_a_bench_folder_keeps_one(tmp_path):
    import pytest

    from recon4d.bench.davis import fit_config, guard_config, parse
    from recon4d.errors import UserError

    cfg, plain = parse(["--quick"])
    assert plain is None
    base = fit_config(cfg)
    _, config = parse(["--quick", "--config.steps.joint", "7", "--config.lr-scale", "0.5"])
    assert (config.steps.joint, config.lr_scale) == (7, 0.5)
    # everything else is the quick bench's own: the test preset with its shortened per-frame stages
    assert (config.steps.cameras, config.steps.settle, config.holdout_every) == (5, 50, 8)
    assert (base.steps.cameras, base.steps.settle) == (5, 50) and (base.steps.joint, base.lr_scale) != (7, 0.5)
    with pytest.raises(UserError, match="unknown option --bogus"):
        parse(["--bogus", "1"])
    guard_config(tmp_path, base)
    guard_config(tmp_path, base)  # the same config again: a resumed run
    with pytest.raises(UserError, match="another fit config"):
        guard_config(tmp_path, config)
