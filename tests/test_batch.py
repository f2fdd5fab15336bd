"""`recon4d batch` with a real local Ray instance on 2 CPUs and tiny synthetic scenes.

Three scenes, one made to fail (a corrupt input frame mask, read by the GT-priors stage):
the batch ends with 2 done and 1 failed with its error in batch.json; after the input is
fixed a re-run fits only the missing scene; a driver killed mid-batch (its whole process
group, as a terminal or a scheduler would) loses nothing on re-run and repeats no
finished scene.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recon4d.batch.inputs import discover
from recon4d.batch.manifest import Manifest, fit_complete
from recon4d.batch.runner import BatchOptions, run_batch
from recon4d.fit.presets import load_preset

os.environ.setdefault("RAY_DISABLE_IMPORT_WARNING", "1")
ray = pytest.importorskip("ray")

# 1 static + 1 joint step: the batch machinery is under test, not the optimiser.
FAST = ["--config.steps.static", "1", "--config.steps.scaffold", "0", "--config.steps.joint", "1",
        "--config.steps.features", "0"]


def fast_config(joint: int = 1):
    cfg = load_preset("test")
    return dataclasses.replace(cfg, steps=dataclasses.replace(cfg.steps, static=1, scaffold=0, joint=joint,
                                                              features=0))


def batch_runs(scene_dir: Path) -> int:
    """How many batch attempts wrote into the scene's log."""
    return (scene_dir / "log.txt").read_text().count("batch: run ")


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    """Three tiny synth scenes (seeds 1-3), generated once for the module."""
    from tests.fitted import synth_scene

    root = tmp_path_factory.mktemp("batch_src")
    for seed in (1, 2, 3):
        synth_scene(root, "--seed", str(seed))
    return root


@pytest.fixture(scope="module")
def local_ray():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=96 * 1024**2)
    yield
    ray.shutdown()


def copy_sources(sources: Path, dest: Path) -> list[str]:
    shutil.copytree(sources, dest)
    return sorted(p.name for p in dest.iterdir())


def test_failure_is_recorded_and_rerun_completes_only_the_missing_scene(sources, local_ray, tmp_path):
    names = copy_sources(sources, tmp_path / "src")
    good, bad = names[:2], names[2]
    mask = tmp_path / "src" / bad / "Annotations" / "00000.png"
    original = mask.read_bytes()
    mask.write_bytes(b"not a png")
    out = tmp_path / "out"
    opts = BatchOptions(out=out, config=fast_config(), priors="gt", retries=1, gpus_per_scene=0)

    first = run_batch(discover(tmp_path / "src"), opts)
    on_disk = Manifest.load(out)
    assert [on_disk.scenes[n].status for n in names] == ["done", "done", "failed"]
    assert on_disk.scenes == first.scenes
    failed = on_disk.scenes[bad]
    assert "cannot identify image file" in failed.error and "00000.png" in failed.error
    assert failed.attempts == 2  # the first try and Ray's one retry
    assert Path(failed.log) == out / bad / "log.txt" and "Traceback" in Path(failed.log).read_text()
    for name in good:
        assert on_disk.scenes[name].metrics["stage"] == "done" and on_disk.scenes[name].attempts == 1
    stamps = {n: (out / n / "metrics.json").stat().st_mtime_ns for n in good}
    finished = {n: on_disk.scenes[n].finished for n in good}
    first_end = time.time_ns()

    mask.write_bytes(original)
    run_batch(discover(tmp_path / "src"), opts)
    again = Manifest.load(out)
    assert all(again.scenes[n].status == "done" for n in names)
    for name in good:  # untouched: same file, same record, one batch attempt in its log
        assert (out / name / "metrics.json").stat().st_mtime_ns == stamps[name]
        assert again.scenes[name].finished == finished[name] and again.scenes[name].attempts == 1
        assert batch_runs(out / name) == 1
    assert (out / bad / "metrics.json").stat().st_mtime_ns > first_end
    assert again.scenes[bad].attempts == 3 and again.scenes[bad].error is None


def _cli(src: Path, out: Path, joint: int) -> list[str]:
    steps = [*FAST[:5], str(joint), *FAST[6:]]
    return [sys.executable, "-m", "recon4d.cli", "batch", "--inputs", str(src), "--out", str(out), "--num-cpus",
            "2", "--retries", "0", "--preset", "test", "--priors", "gt", *steps]


def test_killed_driver_loses_nothing_and_repeats_nothing(sources, tmp_path):
    names = copy_sources(sources, tmp_path / "src")
    out = tmp_path / "out"
    env = {**os.environ, "RAY_DISABLE_IMPORT_WARNING": "1"}
    # Enough joint steps that the third scene (queued behind two CPU slots) is still fitting when
    # the first one ends and the driver is killed.
    cmd = _cli(tmp_path / "src", out, joint=100)
    with open(tmp_path / "driver.log", "w") as log:
        driver = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + 240
    try:
        while not any(fit_complete(out / n) for n in names):
            assert driver.poll() is None, (tmp_path / "driver.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no scene finished in time"
            time.sleep(0.2)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and the Ray instance it started
        driver.wait()
    finished = {n: (out / n / "metrics.json").stat().st_mtime_ns for n in names if fit_complete(out / n)}
    started = {n: batch_runs(out / n) if (out / n / "log.txt").exists() else 0 for n in set(names) - set(finished)}
    assert len(finished) < len(names), "every scene finished before the kill; nothing was interrupted"
    json.loads((out / "batch.json").read_text())  # the manifest survived the kill whole

    rerun = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    manifest = Manifest.load(out)
    assert all(manifest.scenes[n].status == "done" and fit_complete(out / n) for n in names)
    for name, stamp in finished.items():
        assert (out / name / "metrics.json").stat().st_mtime_ns == stamp
        assert batch_runs(out / name) == 1
    for name, runs in started.items():  # interrupted or never started: exactly one more attempt
        assert batch_runs(out / name) == runs + 1 and manifest.scenes[name].error is None
