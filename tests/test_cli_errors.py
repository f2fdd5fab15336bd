"""The CLI's error boundary: an expected error is one line and exit 2 with nothing half-written; a bug is one
line naming the file that holds its traceback, exit 1.

The bad-input cases run the real CLI in a subprocess (what a user sees); the bug case patches a command
in-process, which a subprocess cannot do. No case fits anything: each fails before the optimiser starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import cv2
import pytest

from tests.test_ingest import _faststart_mp4, _frames


def _shown(stderr: str) -> list[str]:
    """The non-empty stderr lines a terminal shows: a progress bar that erased itself with ``\\r`` leaves only
    what was written after it."""
    lines = (line.rsplit("\r", 1)[-1].strip() for line in stderr.split("\n"))
    return [line for line in lines if line]


def _cli(tmp_path: Path, *args: str) -> tuple[int, str]:
    """Run ``recon4d <args>`` in tmp_path; (exit code, the one line it printed on stderr)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-m", "recon4d.cli", *args], cwd=tmp_path, env=env,
                         capture_output=True, timeout=300)
    stderr = run.stderr.decode()  # bytes: text mode would turn a progress bar's \r into line breaks
    assert "Traceback" not in stderr, stderr
    shown = _shown(stderr)
    assert len(shown) == 1, stderr
    assert not (tmp_path / "cache" / "recon4d").exists()  # an expected error writes no traceback
    return run.returncode, shown[0]


def _text_named_mp4(tmp_path: Path) -> Path:
    path = tmp_path / "x.mp4"
    path.write_text("not a video")
    return path


def _truncated_mp4(tmp_path: Path) -> Path:
    data = _faststart_mp4(tmp_path / "long.mp4", 30).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    return cut


def _image_folder(tmp_path: Path, *sizes: tuple[int, int]) -> Path:
    folder = tmp_path / "frames_in"
    folder.mkdir()
    for i, (w, h) in enumerate(sizes):
        cv2.imwrite(str(folder / f"{i:05d}.jpg"), _frames(1, w, h)[0])
    return folder


@pytest.mark.parametrize("make_input, problem", [
    (_text_named_mp4, "is not a readable video"),
    (_truncated_mp4, "is truncated or corrupt"),
    (lambda tmp: _image_folder(tmp, (64, 48)), "at least 2 are needed"),
    (lambda tmp: _image_folder(tmp, (64, 48), (32, 32)), "all frames must have the same size"),
], ids=["text-named-mp4", "truncated-mp4", "one-frame-folder", "mixed-size-frames"])
def test_fit_bad_input_is_one_line_and_writes_no_half_scene(tmp_path, make_input, problem):
    source = make_input(tmp_path)
    code, line = _cli(tmp_path, "fit", "--video", str(source), "--out", str(tmp_path / "out"), "--name", "s")
    assert code == 2
    assert line.startswith(f"recon4d fit: s: priors: {source}") and problem in line  # scene, stage, input
    scene = tmp_path / "out" / "s"
    assert {p.name for p in scene.iterdir()} <= {"log.txt"} if scene.exists() else True


def test_fit_asking_for_ground_truth_priors_of_a_plain_video_is_one_line(tmp_path):
    video = _faststart_mp4(tmp_path / "clip.mp4", 4)
    code, line = _cli(tmp_path, "fit", "--video", str(video), "--out", str(tmp_path / "out"), "--name", "s",
                      "--camera", "gt")
    assert code == 2
    assert line.startswith(f"recon4d fit: s: priors: {video}") and "need a `recon4d synth` scene folder" in line


def _question(**fields) -> dict:
    return {"id": "q1", "video": "scene/video.mp4", "question": "Which way is the ball moving?",
            "choices": {"A": "left", "B": "right"}, "answer": "left", **fields}


def test_answer_reports_a_question_that_is_not_a_string_by_id(tmp_path):
    (tmp_path / "scene").mkdir()
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps([_question(question=5)]))
    code, line = _cli(tmp_path, "answer", "--scene", "scene", "--qa", str(qa))
    assert code == 2
    assert line.startswith("recon4d answer: ") and "question q1" in line and "question must be a text" in line


def test_answer_on_a_folder_that_is_not_a_fitted_scene(tmp_path):
    (tmp_path / "scene").mkdir()
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps([_question()]))
    code, line = _cli(tmp_path, "answer", "--scene", "scene", "--qa", str(qa))
    assert code == 2
    assert line.startswith("recon4d answer: scene is not a fitted scene") and "recon4d fit --video" in line
    assert not list((tmp_path / "scene").iterdir())


def test_unexpected_error_is_one_line_naming_its_traceback_file(tmp_path, monkeypatch, capsys):
    """A bug: one line with the type and message; the traceback goes to the scene log a command declared
    (kept with what the log held), else to the cache file; a UserError from an unguarded main is still exit 2."""
    from recon4d import cli, errors
    from recon4d.commands import evaluate

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    scene_log = tmp_path / "scene" / "log.txt"
    scene_log.parent.mkdir()
    scene_log.write_text("an earlier run\n")

    def broken(argv: list[str]) -> int:
        if argv:
            errors.log_tracebacks_to(argv[0])
        raise RuntimeError("boom\nmore detail")

    monkeypatch.setattr(evaluate, "main", broken)
    assert cli.main(["eval", str(scene_log)]) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"recon4d eval: internal error: RuntimeError: boom (full traceback in {scene_log})"]
    text = scene_log.read_text()
    assert text.startswith("an earlier run\n") and "Traceback (most recent call last)" in text
    assert "in broken" in text and text.rstrip().endswith("more detail")

    assert cli.main(["eval"]) == 1  # the scene log was this run's only: the next one uses the cache file
    fallback = tmp_path / "cache" / "recon4d" / "last-error.txt"
    assert capsys.readouterr().err.splitlines() == [
        f"recon4d eval: internal error: RuntimeError: boom (full traceback in {fallback})"]
    assert "RuntimeError: boom" in fallback.read_text() and scene_log.read_text() == text

    def unguarded(argv: list[str]) -> int:
        raise errors.UserError("the input is wrong; do this instead")

    monkeypatch.setattr(evaluate, "main", unguarded)
    assert cli.main(["eval"]) == 2
    assert capsys.readouterr().err.splitlines() == ["recon4d eval: the input is wrong; do this instead"]
