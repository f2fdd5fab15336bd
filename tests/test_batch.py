"""`recon4d batch` with a real local Ray instance on 2 CPUs and tiny synthetic scenes.

Three videos, one made to fail (a corrupt mp4, refused by frame ingestion): the batch
ends with 2 done and 1 failed with its error in batch.json; after the video is fixed a
re-run fits only the missing scene. A driver killed mid-batch (its whole process group,
as a terminal or a scheduler would) loses nothing on re-run and repeats no finished scene.
"""

from __future__ import annotations

import dataclasses
import fcntl
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
from recon4d.priors.options import PriorOptions

os.environ.setdefault("RAY_DISABLE_IMPORT_WARNING", "1")
ray = pytest.importorskip("ray")


def fast_config():
    """1 static + 1 joint step: the batch machinery is under test, not the optimiser."""
    cfg = load_preset("test")
    return dataclasses.replace(cfg, steps=dataclasses.replace(cfg.steps, static=1, scaffold=0, joint=1, features=0))


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
    """Videos with computed priors (preprocessing is ~1 s on a tiny clip); the third video is corrupt."""
    videos = tmp_path / "videos"
    videos.mkdir()
    for synth in sorted(sources.iterdir()):
        shutil.copy(synth / "video.mp4", videos / f"{synth.name}.mp4")
    names = sorted(p.stem for p in videos.iterdir())
    good, bad = names[:2], names[2]
    video = videos / f"{bad}.mp4"
    original = video.read_bytes()
    video.write_bytes(original[: len(original) // 3][::-1])  # scrambled: no container header left
    out = tmp_path / "out"
    opts = BatchOptions(out=out, config=fast_config(), priors="auto", retries=1, gpus_per_scene=0,
                        prior_options=PriorOptions(max_frames=12))

    first = run_batch(discover(videos), opts)
    on_disk = Manifest.load(out)
    assert [on_disk.scenes[n].status for n in names] == ["done", "done", "failed"]
    for name in good:  # the frame options reach every worker's preprocessing
        assert len(json.loads((out / name / "frames.json").read_text())["indices"]) == 12
    assert on_disk.scenes == first.scenes
    failed = on_disk.scenes[bad]
    assert failed.error.startswith("IngestError") and str(video) in failed.error
    assert failed.attempts == 2  # the first try and Ray's one retry
    assert Path(failed.log) == out / bad / "log.txt" and "Traceback" in Path(failed.log).read_text()
    for name in good:
        assert on_disk.scenes[name].metrics["stage"] == "done" and on_disk.scenes[name].attempts == 1
    stamps = {n: (out / n / "metrics.json").stat().st_mtime_ns for n in good}
    finished = {n: on_disk.scenes[n].finished for n in good}
    first_end = time.time_ns()

    video.write_bytes(original)
    run_batch(discover(videos), opts)
    again = Manifest.load(out)
    assert all(again.scenes[n].status == "done" for n in names)
    for name in good:  # untouched: same file, same record, one batch attempt in its log
        assert (out / name / "metrics.json").stat().st_mtime_ns == stamps[name]
        assert again.scenes[name].finished == finished[name] and again.scenes[name].attempts == 1
        assert batch_runs(out / name) == 1
    assert (out / bad / "metrics.json").stat().st_mtime_ns > first_end
    assert again.scenes[bad].attempts == 3 and again.scenes[bad].error is None


def wait_for_unlocked(scene_dirs: list[Path], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for scene in scene_dirs:
        if not (scene / ".batch.lock").exists():
            continue
        with open(scene / ".batch.lock") as f:
            while True:
                try:
                    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    fcntl.flock(f, fcntl.LOCK_UN)
                    break
                except BlockingIOError:
                    assert time.monotonic() < deadline, f"a worker still holds {scene} after the kill"
                    time.sleep(0.2)


def _cli(src: Path, out: Path, joint: int) -> list[str]:
    return [sys.executable, "-m", "recon4d.cli", "batch", "--inputs", str(src), "--out", str(out), "--num-cpus",
            "2", "--retries", "0", "--preset", "test", "--priors", "gt", "--config.steps.static", "1",
            "--config.steps.scaffold", "0", "--config.steps.motion", "0", "--config.steps.joint", str(joint),
            "--config.steps.features", "0"]


def test_killed_driver_loses_nothing_and_repeats_nothing(sources, tmp_path):
    names = copy_sources(sources, tmp_path / "src")
    out = tmp_path / "out"
    env = {**os.environ, "RAY_DISABLE_IMPORT_WARNING": "1"}
    # Enough joint steps that the third scene (queued behind two CPU slots) is still fitting when
    # the first one ends and the driver is killed.
    cmd = _cli(tmp_path / "src", out, joint=400)
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
    # Ray workers live in their own process groups and exit once they see their raylet gone; one may
    # finish its scene first. Judge the folders once no worker holds a scene lock any more.
    wait_for_unlocked([out / n for n in names], timeout=60)
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
        assert manifest.scenes[name].attempts == 1 and manifest.scenes[name].durations
