"""Open a fitted scene folder for the commands that read one (render, export, view).

Why one place: each of them must refuse a folder from an unfinished fit with the same
clear message (which stage is missing, the command that makes it), instead of
rendering a half-optimised model or failing deep inside torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from recon4d.device import resolve_device
from recon4d.scene import DynamicScene
from recon4d.scene.data import SceneData, load_scene_data
from recon4d.scene.state import load_scene
from recon4d.scene_folder import FIT_STAGES, MissingStageError, SceneFolder


@dataclass
class FittedScene:
    folder: Path
    scene: DynamicScene
    heads: nn.ModuleDict
    meta: dict[str, Any]
    data: SceneData

    @property
    def fps(self) -> float:
        return float(SceneFolder(self.folder).frames_info().get("fps", 12))


def _fit_command(folder: Path) -> str:
    source = SceneFolder(folder).frames_info().get("source", "<input>")
    return f"recon4d fit --video {source} --out {folder.parent} --name {folder.name}"


def load_fitted(folder: Path, device: str = "auto") -> FittedScene:
    """Scene, decoder heads and priors of a completed fit; MissingStageError says what to run otherwise.

    The scene and heads go to ``device`` (auto: the GPU when there is one, where gsplat renders); the priors
    stay on the CPU, and a render moves the cameras it needs."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingStageError(f"{folder} is not a scene folder; make one with "
                                f"`recon4d fit --video <input> --out {folder.parent} --name {folder.name}`")
    data = load_scene_data(folder)  # names the missing frames/priors stage itself
    model = SceneFolder(folder).model_meta
    if not model.exists():
        raise MissingStageError(f"{model} is missing: the optimisation (stages {', '.join(FIT_STAGES)}) has not "
                                f"run; run `{_fit_command(folder)}`")
    stage = json.loads(model.read_text()).get("stage")
    if stage != "done":
        raise MissingStageError(f"{folder} holds an unfinished fit: stage {stage!r} and the ones after it "
                                f"({', '.join(FIT_STAGES[FIT_STAGES.index(stage):]) if stage in FIT_STAGES else '?'}) "
                                f"are missing; finish it with `{_fit_command(folder)} --resume`")
    scene, heads, meta = load_scene(SceneFolder(folder).model)
    scene.requires_grad_(False)
    heads.requires_grad_(False)
    target = resolve_device(device)
    return FittedScene(folder, scene.to(target), heads.to(target), meta, data)
