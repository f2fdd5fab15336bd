"""A fit killed with SIGKILL and resumed ends bit for bit where an uninterrupted fit ends; a checkpoint
split by a kill between its files is completed, or refused with a clear error."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from recon4d.commands import fit as fit_command
from recon4d.fit.checkpoint import CHECKPOINT_FILES, CheckpointError
from recon4d.fit.trainer import FitConfig, StageSteps, Trainer
from recon4d.io import atomic
from recon4d.scene.data import load_scene_data
from tests.conftest import requires_compiler
from tests.fitted import synth_scene

pytestmark = requires_compiler

# Densification refines at joint steps 20, 40, 60 and 80, and a checkpoint lands at joint step 50, between two
# refinements, with ten steps of gradient statistics gathered: where a resume used to drift. The next
# checkpoint is 50 steps later, time enough for the kill to land before it.
SCHEDULE = ["--preset", "test", "--config.steps.motion", "0", "--config.steps.joint", "150",
            "--config.densify.refine-every", "20", "--config.checkpoint-every", "50",
            "--config.init.static-stride", "6"]
KILL_AT = ("joint", 50)
METRICS = ("psnr_train", "ssim_train", "psnr_per_frame", "n_gaussians", "n_static", "n_dynamic", "n_nodes")


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    return synth_scene(tmp_path_factory.mktemp("resume_kill") / "synth", "--motion", "left")


def _fit(synth: Path, out: Path, *extra: str) -> subprocess.Popen:
    """A `recon4d fit` subprocess with exact priors on SCHEDULE, its output in <out>.log.

    It runs outside the repository, so that its imports follow PYTHONPATH as the test's
    own do, and on one thread: the same count in every run (how many threads split a
    CPU reduction can change its last bit), and on two shared cores torch's waiting
    threads made a step of this scene 50 times slower (0.9 s instead of 0.016 s).
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "recon4d.cli", "fit", "--video", str(synth), "--out", str(out),
           "--priors", "gt", *SCHEDULE, *extra]
    with open(out.with_suffix(".log"), "w") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=out.parent,
                                env={**os.environ, "OMP_NUM_THREADS": "1"})


def _finish(proc: subprocess.Popen, out: Path) -> None:
    assert proc.wait(timeout=600) == 0, out.with_suffix(".log").read_text()[-3000:]


def _checkpoint_at(model: Path) -> tuple[str, int] | None:
    try:
        meta = json.loads((model / "scene.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return meta["stage"], meta["step"]


def _kill_at(proc: subprocess.Popen, out: Path, model: Path, at: tuple[str, int]) -> None:
    """SIGKILL ``proc`` as soon as its checkpoint ``at`` is on disk (polled: scene.json is renamed in last)."""
    while _checkpoint_at(model) != at:
        assert proc.poll() is None, f"ended before its checkpoint {at}: {out.with_suffix('.log').read_text()[-3000:]}"
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def test_fit_killed_and_resumed_ends_where_an_uninterrupted_fit_ends(synth, tmp_path):
    whole, part = tmp_path / "whole", tmp_path / "part"
    _finish(_fit(synth, whole), whole)
    model = part / synth.name / "model"
    _kill_at(_fit(synth, part), part, model, KILL_AT)
    # the kill must land before the next checkpoint, or the resume would start past what it tests
    assert _checkpoint_at(model) == KILL_AT
    _finish(_fit(synth, part, "--resume"), part)
    assert "resuming at stage joint, step 50" in (part / synth.name / "log.txt").read_text()

    expected, resumed = (json.loads((d / synth.name / "metrics.json").read_text()) for d in (whole, part))
    assert {k: resumed[k] for k in METRICS} == {k: expected[k] for k in METRICS}
    expected = load_file(str(whole / synth.name / "model" / "scene.safetensors"))
    resumed = load_file(str(model / "scene.safetensors"))
    assert resumed.keys() == expected.keys()
    for name, tensor in expected.items():
        assert resumed[name].shape == tensor.shape and torch.equal(resumed[name], tensor), name


@pytest.fixture(scope="module")
def trainer_data(synth, tmp_path_factory):
    """The tiny scene's frames and exact priors, for trainers built in-process."""
    out = tmp_path_factory.mktemp("resume_kill_priors")
    assert fit_command.main(["--video", str(synth), "--out", str(out), "--priors", "gt", "--stop-after", "priors"]) == 0
    data = load_scene_data(out / synth.name, cameras="priors")
    data.teachers = {}
    return data


class _Killed(BaseException):
    """Stands for a SIGKILL: raised in place of a rename, nothing after it runs."""


def _two_checkpoints(data, model: Path, monkeypatch, renames_before_kill: int) -> Trainer:
    """A checkpoint at static step 0, then a save at static step 3 (other parameters) killed after
    ``renames_before_kill`` of its renames; returns the trainer as it was at step 3."""
    cfg = FitConfig(steps=StageSteps(static=6, scaffold=0, motion=0, joint=0, cameras=0, settle=0, features=0))
    cfg.init.static_stride = 6
    trainer = Trainer(data, cfg, model, log=lambda _: None)
    trainer.initialise()
    trainer.save()
    trainer.step = 3
    with torch.no_grad():
        trainer.scene.static.means += 1.0
        trainer.poses.delta += 0.5
    real_replace, renames = os.replace, []

    def replace(src, dst):  # counts the group's renames only, not those of the atomic writes of staged files
        if Path(src) == atomic.staged_path(dst):
            if len(renames) == renames_before_kill:
                raise _Killed
            renames.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    with pytest.raises(_Killed):
        trainer.save()
    monkeypatch.setattr(atomic.os, "replace", real_replace)
    return trainer


@pytest.mark.parametrize("renames_before_kill", range(len(CHECKPOINT_FILES)))
def test_checkpoint_split_by_a_kill_loads_whole(trainer_data, tmp_path, monkeypatch, renames_before_kill):
    """Killed before any rename: the old checkpoint is untouched; killed between two renames: the new
    checkpoint, half in place and half staged, is completed. Either way every part is from one save."""
    saved = _two_checkpoints(trainer_data, tmp_path / "model", monkeypatch, renames_before_kill)
    loaded = Trainer(trainer_data, saved.cfg, tmp_path / "model", log=lambda _: None)
    loaded.load()
    new = renames_before_kill > 0  # a part renamed: the new save is the one there is to load
    assert loaded.step == (3 if new else 0)
    assert torch.equal(loaded.scene.static.means, saved.scene.static.means.detach()) == new
    assert torch.equal(loaded.poses.delta, saved.poses.delta.detach()) == new
    if new:
        assert not list((tmp_path / "model").glob(".*.staged.*"))


def test_checkpoint_mixed_beyond_repair_is_refused(trainer_data, tmp_path, monkeypatch):
    """A part from another save with no staged part to complete it: a clear error, not a resume from two steps."""
    model = tmp_path / "model"
    _two_checkpoints(trainer_data, model, monkeypatch, renames_before_kill=1)
    for staged in model.glob(".*.staged.*"):
        staged.unlink()
    trainer = Trainer(trainer_data, FitConfig(), model, log=lambda _: None)
    with pytest.raises(CheckpointError, match="mixes two saves .*delete"):
        trainer.load()
