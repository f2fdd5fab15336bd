"""``batch.json``: what a batch did to each scene, and what a restarted batch may skip.

Why two sources of truth: the manifest is written only by the driver, so a driver
killed after a worker finished but before it recorded the result would forget that
scene. The scene folder's own markers (``model/scene.json`` stage ``done`` and
``metrics.json``, which ``run_fit`` writes last) are written by the worker itself.
A scene is skipped when its folder says it is complete; the manifest then keeps
the history (attempts, durations, errors) and is brought up to date from the folder.
A manifest that says ``done`` for a folder that is no longer complete is stale and the
scene runs again. Every save is atomic (temp file + rename), so a kill never leaves
a half-written manifest.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from recon4d.io.atomic import write_json
from recon4d.scene_folder import SceneFolder

MANIFEST = "batch.json"
STATUSES = ("pending", "queued", "running", "done", "failed")


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def fit_complete(scene_dir: Path, stop_after: str | None = None) -> dict | None:
    """The scene's metrics when its folder holds a finished fit (or, with ``stop_after="priors"``, finished
    priors: their report is written last), else None."""
    if stop_after == "priors":
        return {"stage": "priors"} if (scene_dir / "priors" / "report.json").exists() else None
    try:
        metrics = json.loads((scene_dir / "metrics.json").read_text())
    except (OSError, ValueError):
        return None
    return metrics if stage_reached(scene_dir) == "done" and metrics.get("stage") == "done" else None


def stage_reached(scene_dir: Path) -> str:
    """The stage a scene folder's checkpoint is at ("priors" before the optimisation has begun)."""
    try:
        return json.loads(SceneFolder(scene_dir).model_meta.read_text()).get("stage", "priors")
    except (OSError, ValueError):
        return "priors"


@dataclass
class SceneRecord:
    """One scene's line in the manifest."""

    scene: str
    source: str
    status: str = "pending"
    attempts: int = 0
    """Task attempts over all batch runs (Ray retries included)."""
    durations: list[float] = field(default_factory=list)
    """Wall seconds of each batch run that ended for this scene (done or failed)."""
    started: str | None = None
    finished: str | None = None
    metrics: dict = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None
    """For a failed scene: "error" (an expected failure, its message says what to do) or "crash" (a bug)."""
    failed_stage: str | None = None
    log: str | None = None
    note: str | None = None


class Manifest:
    """The scene records of one ``--out`` folder, saved atomically after every change."""

    def __init__(self, out: Path, scenes: dict[str, SceneRecord] | None = None):
        self.out = Path(out)
        self.scenes: dict[str, SceneRecord] = scenes or {}

    @property
    def path(self) -> Path:
        return self.out / MANIFEST

    @classmethod
    def load(cls, out: Path) -> Manifest:
        path = Path(out) / MANIFEST
        if not path.exists():
            return cls(out)
        raw = json.loads(path.read_text())
        return cls(out, {name: SceneRecord(**rec) for name, rec in raw.get("scenes", {}).items()})

    def record(self, scene: str, source: Path) -> SceneRecord:
        rec = self.scenes.setdefault(scene, SceneRecord(scene, str(source)))
        rec.source = str(source)
        return rec

    def counts(self) -> dict[str, int]:
        return {s: sum(r.status == s for r in self.scenes.values()) for s in STATUSES}

    def save(self) -> None:
        write_json(self.path, {"updated": now(), "counts": self.counts(),
                               "scenes": {name: asdict(rec) for name, rec in self.scenes.items()}})
