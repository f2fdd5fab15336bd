"""The scene folder: the one contract between recon4d's steps, and the only module that spells its layout.

Every step reads what the steps before it wrote here and nothing else, so a command can start
from any point the folder has reached, a killed run resumes from it, and a folder made on one
machine is continued on another. The layout::

    <scene>/frames/00000.jpg ...   the working frames (and frames/masks/ when the user gave masks)
    <scene>/frames.json            fps, size, source, source frame indices
    <scene>/priors/                camera, depth, tracks, flow, masks, points, report, cache keys,
                                   teachers/<name>.safetensors (teacher features per frame)
    <scene>/model/                 the fitted scene (scene.safetensors + scene.json), refined cameras,
                                   optimiser state: one checkpoint (written together)
    <scene>/metrics.json, log.txt, preview.png

``STAGES`` is the order in which ``recon4d fit`` fills it. The file names inside ``model/`` are
here too, so that a reader of a fit (render, export, eval) need not import the fit that writes them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from recon4d.errors import UserError

FitStage = Literal["static", "scaffold", "motion", "joint", "cameras", "settle", "nodes", "features"]
"""One of the optimiser's stages (see :mod:`recon4d.fit.stages`)."""
FIT_STAGES: tuple[FitStage, ...] = get_args(FitStage)
"""The optimiser's stages, in order."""
Stage = Literal["priors", FitStage]
"""One of the stages ``recon4d fit --stop-after`` can stop after."""
STAGES: tuple[Stage, ...] = get_args(Stage)
"""Every stage ``recon4d fit --stop-after`` can stop after: the priors, then the optimiser's."""

SCENE_TENSORS, SCENE_META = "scene.safetensors", "scene.json"
"""The fitted scene in ``model/``: its tensors, and the sidecar that says which stage it reached
(written by :mod:`recon4d.scene.state`)."""
CAMERAS_FILE = "cameras.json"
"""The fit's refined cameras in ``model/`` (written by :mod:`recon4d.fit.cameras`)."""
OPTIMIZER_FILE = "optimizer.pt"
"""The optimiser's state in ``model/``, what a resumed fit continues from (written by :mod:`recon4d.fit.trainer`)."""


class MissingStageError(UserError, RuntimeError):
    """A scene folder lacks the output of an earlier stage; the message says how to make it."""


@dataclass(frozen=True)
class SceneFolder:
    """The paths of one scene folder (nothing is created or read by building one)."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    # ---- frames -------------------------------------------------------------------------
    @property
    def frames(self) -> Path:
        return self.root / "frames"

    @property
    def frames_json(self) -> Path:
        return self.root / "frames.json"

    @property
    def user_masks(self) -> Path:
        """The user's masks at the working size (object ids, 0 = background), when given."""
        return self.frames / "masks"

    # ---- priors -------------------------------------------------------------------------
    @property
    def priors(self) -> Path:
        return self.root / "priors"

    @property
    def camera(self) -> Path:
        """The solved cameras: K, world-to-camera viewmats (OpenCV), motion model, the solve's info."""
        return self.priors / "camera.json"

    @property
    def camera_points(self) -> Path:
        """The camera solve's static points and which tracks it used."""
        return self.priors / "camera_points.npz"

    @property
    def depth(self) -> Path:
        return self.priors / "depth.npz"

    @property
    def flow(self) -> Path:
        return self.priors / "flow.npz"

    @property
    def masks(self) -> Path:
        """The dynamic masks (and the motion residual they came from)."""
        return self.priors / "masks.npz"

    @property
    def points(self) -> Path:
        """Per track: moving or not, and its static world point."""
        return self.priors / "points.npz"

    @property
    def tracks(self) -> Path:
        """The tracks with their dynamic flags and world points: what the fit reads."""
        return self.priors / "tracks.npz"

    @property
    def tracks_raw(self) -> Path:
        """The tracks as the tracker made them, before any labelling."""
        return self.priors / "tracks_raw.npz"

    @property
    def report(self) -> Path:
        return self.priors / "report.json"

    @property
    def cache(self) -> Path:
        """Each prior step's key (see :mod:`recon4d.priors.cache`)."""
        return self.priors / "cache.json"

    @property
    def teachers(self) -> Path:
        return self.priors / "teachers"

    def teacher(self, name: str) -> Path:
        """One teacher's features: ``{"features": [T, h, w, C]}`` (safetensors)."""
        return self.teachers / f"{name}.safetensors"

    # ---- the fit ------------------------------------------------------------------------
    @property
    def model(self) -> Path:
        return self.root / "model"

    @property
    def model_meta(self) -> Path:
        """The fitted scene's sidecar: its stage, decoder heads, skinning (renamed into place last)."""
        return self.model / SCENE_META

    @property
    def model_tensors(self) -> Path:
        return self.model / SCENE_TENSORS

    @property
    def model_cameras(self) -> Path:
        """The cameras the fit refined (absent before a fit): ``{"K", "viewmats", "delta", ...}``."""
        return self.model / CAMERAS_FILE

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.json"

    @property
    def log(self) -> Path:
        return self.root / "log.txt"

    @property
    def preview(self) -> Path:
        return self.root / "preview.png"

    def renders(self, path: str) -> Path:
        """``recon4d render``'s default output for one camera path (``input``, ``global``, ...)."""
        return self.root / "renders" / path

    # ---- questions about the folder -----------------------------------------------------
    def has_priors(self) -> bool:
        """Every prior file the fit reads is there. Why all of them, not the camera alone: a priors run killed
        after the camera solve (or a user deleting ``depth.npz`` to have it made again) left a folder that
        counted as done, and every fit of it stopped on the missing file, told to run the priors again,
        which were then skipped as done."""
        return all(p.exists() for p in (self.camera, self.tracks, self.depth, self.masks))

    def has_fit(self) -> bool:
        """A checkpoint of the fit exists (``model/scene.json`` is renamed into place last)."""
        return self.model_meta.exists()

    def require(self, path: Path, how: str) -> Path:
        """``path``, or a MissingStageError saying ``how`` to make it."""
        if not path.exists():
            raise MissingStageError(f"{path} is missing; {how}")
        return path

    def frames_info(self) -> dict:
        """``frames.json``: fps, size, source (the input path) and source frame indices; {} before ingest."""
        return json.loads(self.frames_json.read_text()) if self.frames_json.exists() else {}
