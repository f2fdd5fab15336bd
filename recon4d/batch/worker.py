"""The work of one scene inside a Ray task: lock the scene folder, fit, report.

Why a lock on top of "one task per scene name": the driver guarantees one task per
scene within a batch, but two batches (or a batch and a hand-run ``recon4d fit``) can
point at the same ``--out``. ``flock`` on ``<scene>/.batch.lock`` is released by the
kernel when the holder dies, so a killed worker never leaves a stale lock, and it
works across nodes on NFS. The lock file's content says who holds it and counts the
attempts of the current batch run (Ray's retries call this function again).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

LOCK = ".batch.lock"


class SceneBusyError(RuntimeError):
    """Another live process holds the scene folder."""


class SceneFailedError(RuntimeError):
    """A scene's fit raised; carries what the manifest needs (args keep it picklable for Ray).

    ``kind`` is "error" for an expected failure (a ``UserError``: its message says what to do) and
    "crash" for anything else (a bug: the traceback is in the scene's log); ``stage`` is where it stopped."""

    def __init__(self, message: str, log: str, attempt: int, seconds: float, kind: str = "crash",
                 stage: str = "priors"):
        super().__init__(message, log, attempt, seconds, kind, stage)
        self.message, self.log, self.attempt, self.seconds = message, log, attempt, seconds
        self.kind, self.stage = kind, stage

    def __str__(self) -> str:
        return self.message


@dataclass
class FitTask:
    """Everything a worker needs to fit one scene (plain data: it is pickled to the worker)."""

    scene_dir: Path
    source: Path
    config: object  # recon4d.fit.trainer.FitConfig; untyped here so the driver need not import torch
    config_on_gpu: object = None
    """With ``--preset auto``: the config for a worker that has a GPU (``config`` is then the CPU one). The
    worker chooses, not the driver: a CPU-only Ray head must not send every GPU worker the CPU preset."""
    prior_options_on_gpu: object = None
    """With ``--preset auto``: the frames and priors options of a worker that has a GPU (its resolution)."""
    priors: str = "auto"
    teachers: tuple[str, ...] = ()
    run_id: str = ""
    vlm: str | None = None
    """Also distil this VLM's vision encoder (vqa_bridge adapter name, e.g. tiny, internvideo2)."""
    vlm_path: str | None = None
    prior_options: object = None  # recon4d.priors.options.PriorOptions; None: the defaults
    stop_after: str | None = None
    """End after this stage (as ``recon4d fit --stop-after``); None: the whole fit."""


def read_lock(scene_dir: Path) -> dict:
    """The lock file's last content (who ran, which attempt); {} when absent or mid-write."""
    try:
        return json.loads((Path(scene_dir) / LOCK).read_text())
    except (OSError, ValueError):
        return {}


class SceneLock:
    """Exclusive hold on a scene folder for one attempt; counts attempts per batch run."""

    def __init__(self, scene_dir: Path, run_id: str):
        self.path = Path(scene_dir) / LOCK
        self.run_id = run_id
        self.attempt = 0

    def __enter__(self) -> SceneLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            holder = read_lock(self.path.parent)
            raise SceneBusyError(f"{self.path.parent} is being written by host {holder.get('host')} "
                                 f"pid {holder.get('pid')} (lock {self.path})") from None
        before = read_lock(self.path.parent)
        self.attempt = before.get("attempt", 0) + 1 if before.get("run") == self.run_id else 1
        self._write({"state": "running", "started": time.time()})
        return self

    def _write(self, extra: dict) -> None:
        body = json.dumps({"run": self.run_id, "attempt": self.attempt, "host": socket.gethostname(),
                           "pid": os.getpid(), **extra}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, body, 0)

    def __exit__(self, *exc) -> None:
        self._write({"state": "idle", "ended": time.time()})
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def _append_log(scene_dir: Path, text: str) -> None:
    with open(scene_dir / "log.txt", "a") as f:
        f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {text}\n")


def ensure_vlm_teacher(scene_dir: Path, model: str, model_path: str | None) -> str:
    """Cache the VLM's vision-encoder tokens in priors/teachers/ (the fit distils every cached teacher).

    Done inside the scene's task, after priors and before the fit, so the encoder runs on
    the GPU the task holds and the scene stays independent of every other scene.
    """
    from recon4d.scene.teachers import write_teacher
    from recon4d.scene_folder import SceneFolder
    from vqa_bridge.adapters import load_adapter
    from vqa_bridge.modalities import read_frames
    from vqa_bridge.teacher import extract_teacher

    adapter = load_adapter(model, model_path, vision_only=True)
    if not SceneFolder(scene_dir).teacher(adapter.teacher_name).exists():
        write_teacher(scene_dir, adapter.teacher_name, *extract_teacher(adapter, read_frames(scene_dir)))
        _append_log(scene_dir, f"batch: teacher {adapter.teacher_name} extracted with {model}")
    return adapter.teacher_name


def for_this_machine(task: FitTask) -> tuple[object, object]:
    """(fit config, prior options) for this worker: the ``*_on_gpu`` pair where it has a GPU and the task
    carries one (``--preset auto``), else ``config`` and ``prior_options``."""
    if task.config_on_gpu is not None:
        import torch

        if torch.cuda.is_available():
            return task.config_on_gpu, task.prior_options_on_gpu
    return task.config, task.prior_options


def fit_scene_task(task: FitTask) -> dict:
    """Fit one scene (resuming from its folder); return what the manifest records, or raise SceneFailedError."""
    from recon4d.batch.manifest import stage_reached
    from recon4d.errors import UserError
    from recon4d.fit.pipeline import FitJob, run_fit
    from recon4d.priors.options import PriorOptions
    from recon4d.scene_folder import SceneFolder

    scene_dir = Path(task.scene_dir)
    started = time.perf_counter()
    with SceneLock(scene_dir, task.run_id) as lock:
        _append_log(scene_dir, f"batch: run {task.run_id} attempt {lock.attempt} on {socket.gethostname()} "
                               f"pid {os.getpid()}")
        config, options = for_this_machine(task)
        options = options if options is not None else PriorOptions()
        job = FitJob(scene_dir=scene_dir, source=Path(task.source), config=config, priors=task.priors,
                     teachers=tuple(task.teachers), resume=SceneFolder(scene_dir).has_fit(),
                     options=options, stop_after=task.stop_after)
        try:
            if task.vlm:
                run_fit(FitJob(scene_dir=scene_dir, source=job.source, priors=task.priors, stop_after="priors",
                               options=options))
                ensure_vlm_teacher(scene_dir, task.vlm, task.vlm_path)
            metrics = run_fit(job)
        except Exception as exc:  # noqa: BLE001 - any failure of a scene is reported, never lost
            _append_log(scene_dir, "batch: failed\n" + traceback.format_exc())
            kind = "error" if isinstance(exc, UserError) else "crash"
            raise SceneFailedError(f"{type(exc).__name__}: {exc}", str(scene_dir / "log.txt"), lock.attempt,
                                   time.perf_counter() - started, kind, stage_reached(scene_dir)) from None
        return {"metrics": metrics, "attempt": lock.attempt, "seconds": time.perf_counter() - started,
                "log": str(scene_dir / "log.txt")}
