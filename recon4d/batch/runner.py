"""Run a batch of scene fits as Ray tasks and keep ``batch.json`` up to date.

What runs where: this driver only plans, submits and records; every scene's
preprocessing and fit run inside one Ray task (``worker.fit_scene_task``) on
whichever node Ray places it, reading and writing only that scene's folder under
``--out`` (which must be on a file system every node sees). Placement, GPU
assignment and retries are Ray's: each task asks for ``num_gpus``/``num_cpus`` and
is retried through ``max_retries`` + ``retry_exceptions``. The driver is the only
writer of ``batch.json``; workers write only their scene folder.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from recon4d.batch.inputs import SceneSpec
from recon4d.batch.manifest import Manifest, fit_complete, now
from recon4d.batch.progress import Progress, summary_table
from recon4d.batch.worker import FitTask, SceneFailedError, fit_scene_task, read_lock


@dataclass
class BatchOptions:
    """How to fit every scene and how much of the cluster each fit takes."""

    out: Path
    config: object  # FitConfig, passed through to every worker
    config_on_gpu: object = None
    """``--preset auto``: the config a worker with a GPU fits with (``FitTask.config_on_gpu``)."""
    prior_options_on_gpu: object = None
    priors: str = "auto"
    prior_options: object = None  # recon4d.priors.options.PriorOptions; None: the defaults
    teachers: tuple[str, ...] = ()
    retries: int = 2
    """Ray task retries after the first attempt (exceptions and worker crashes alike)."""
    gpus_per_scene: float | None = None
    """None: 1 when the cluster has GPUs, else 0."""
    cpus_per_scene: float = 1.0
    ray_address: str | None = None
    """None: start a local Ray instance; 'auto' or HOST:PORT: join an existing cluster."""
    num_cpus: int | None = None
    """CPUs of the local instance (None: all of this machine); ignored with ray_address."""
    vlm: str | None = None
    """Distil this VLM's vision encoder in every scene (see worker.ensure_vlm_teacher)."""
    vlm_path: str | None = None
    stop_after: str | None = None
    """End every scene after this stage (as ``recon4d fit --stop-after``); only "priors" is recognised as
    complete on a re-run."""
    poll_seconds: float = 1.0


def connect(address: str | None, num_cpus: int | None) -> bool:
    """Join or start Ray; True when this call started it (and should shut it down)."""
    import ray

    if ray.is_initialized():
        return False
    if address:
        ray.init(address=address, log_to_driver=False)
    else:  # "local" forces a fresh instance even when RAY_ADDRESS is set in the environment
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                 object_store_memory=128 * 1024**2)
    return True


def plan(specs: list[SceneSpec], manifest: Manifest, out: Path,
         stop_after: str | None = None) -> tuple[list[SceneSpec], list[str]]:
    """(scenes to run, scenes skipped as complete); brings the manifest in line with the folders."""
    todo, skipped = [], []
    for spec in specs:
        rec = manifest.record(spec.name, spec.source)
        metrics = fit_complete(out / spec.name, stop_after)
        if metrics is not None:
            if rec.status != "done":  # the driver died before it recorded this scene's end
                rec.status, rec.metrics, rec.error, rec.error_kind = "done", metrics, None, None
                rec.attempts += read_lock(out / spec.name).get("attempt", 0)
                rec.durations.append(round(metrics.get("fit_seconds", 0.0), 2))
                rec.note = "found complete in its scene folder (the run that made it was not recorded)"
            skipped.append(spec.name)
            continue
        rec.note = "manifest said done but the scene folder is incomplete: fitted again" \
            if rec.status == "done" else None
        todo.append(spec)
    return todo, skipped


def _record_result(manifest: Manifest, name: str, ref, retries: int) -> None:
    import ray

    rec = manifest.scenes[name]
    rec.finished, rec.log = now(), str(manifest.out / name / "log.txt")
    try:
        result = ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = err.cause
        rec.status = "failed"
        if isinstance(cause, SceneFailedError):
            rec.error, rec.log, rec.error_kind, rec.failed_stage = cause.message, cause.log, cause.kind, cause.stage
            rec.attempts += cause.attempt
            rec.durations.append(round(cause.seconds, 2))
        else:
            rec.error, rec.error_kind = f"{type(cause).__name__}: {cause}", "crash"
            rec.attempts += retries + 1
        return
    except ray.exceptions.RayError as err:  # worker or node died on every attempt
        rec.status, rec.error, rec.error_kind = "failed", f"{type(err).__name__}: {err}", "crash"
        rec.attempts += retries + 1
        return
    rec.status, rec.error, rec.metrics, rec.log = "done", None, result["metrics"], result["log"]
    rec.error_kind = rec.failed_stage = None
    rec.attempts += result["attempt"]
    rec.durations.append(round(result["seconds"], 2))


def run_batch(specs: list[SceneSpec], opts: BatchOptions, progress_every: float = 30.0) -> Manifest:
    """Fit every incomplete scene; returns the saved manifest. Failing scenes never stop the others."""
    import ray

    out = Path(opts.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    manifest = Manifest.load(out)
    todo, skipped = plan(specs, manifest, out, opts.stop_after)
    manifest.save()
    names = [s.name for s in specs]
    if not todo:
        summary_table(manifest, names)
        return manifest
    owned = connect(opts.ray_address, opts.num_cpus)
    try:
        gpus = opts.gpus_per_scene
        if gpus is None:
            gpus = 1 if ray.cluster_resources().get("GPU", 0) > 0 else 0
        slots = int(ray.cluster_resources().get("CPU", 1) // max(opts.cpus_per_scene, 1e-3))
        if gpus:
            slots = min(slots, int(ray.cluster_resources().get("GPU", 0) // gpus))
        # a fresh worker process per scene: its peak memory (metrics.json) is that scene's alone, and what
        # one fit leaves allocated (GPU memory included) is freed before the next
        remote = ray.remote(max_calls=1)(fit_scene_task)
        run_id = uuid.uuid4().hex[:12]
        refs = {}
        for spec in todo:
            rec = manifest.scenes[spec.name]
            rec.status, rec.error, rec.started, rec.finished = "queued", None, None, None
            task = FitTask(scene_dir=out / spec.name, source=spec.source, config=opts.config,
                           config_on_gpu=opts.config_on_gpu, prior_options_on_gpu=opts.prior_options_on_gpu,
                           priors=opts.priors, teachers=tuple(opts.teachers), run_id=run_id, vlm=opts.vlm,
                           vlm_path=opts.vlm_path, prior_options=opts.prior_options, stop_after=opts.stop_after)
            refs[remote.options(name=f"fit {spec.name}", num_cpus=opts.cpus_per_scene, num_gpus=gpus,
                                max_retries=opts.retries, retry_exceptions=True).remote(task)] = spec.name
        manifest.save()
        progress = Progress(len(todo), slots, skipped=len(skipped), every=progress_every)
        try:
            _watch(refs, manifest, run_id, opts, progress)
        except KeyboardInterrupt:
            for name in refs.values():
                manifest.scenes[name].status = "pending"
                manifest.scenes[name].note = "batch interrupted; re-run to continue"
            manifest.save()
            raise
    finally:
        if owned:
            ray.shutdown()
    summary_table(manifest, names)
    return manifest


def _watch(refs: dict, manifest: Manifest, run_id: str, opts: BatchOptions, progress: Progress) -> None:
    """Record each scene as it ends; mark scenes running when their worker holds the scene lock."""
    import ray

    todo = list(refs.values())
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1, timeout=opts.poll_seconds)
        changed = bool(ready)
        for ref in ready:
            name = refs.pop(ref)
            _record_result(manifest, name, ref, opts.retries)
            if manifest.scenes[name].durations:
                progress.durations.append(manifest.scenes[name].durations[-1])
        for name in refs.values():
            lock, rec = read_lock(manifest.out / name), manifest.scenes[name]
            if lock.get("run") == run_id and lock.get("state") == "running" and rec.status != "running":
                rec.status, rec.started, changed = "running", now(), True
        if changed:
            manifest.save()
        states = [manifest.scenes[n].status for n in todo]
        progress.update(states.count("done"), states.count("running"), states.count("failed"))
