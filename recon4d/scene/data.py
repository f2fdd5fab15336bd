"""SceneData: everything the optimiser and the readers of a fit take from a scene folder
(frames, priors, teachers, the fit's refined cameras), as tensors.

The folder's layout is :mod:`recon4d.scene_folder`; this is the one reader of its frames and
priors, so a change of file format touches one module. It sits below the fit, so that render,
export and eval read a folder without importing the optimiser.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import torch
from torch import Tensor

from recon4d.priors.depth import from_sparse_fallback, objects_at_contact_depth
from recon4d.scene.teachers import read_teachers
from recon4d.scene_folder import MissingStageError, SceneFolder


@dataclass
class SceneData:
    images: Tensor  # [T,H,W,3] float in [0,1]
    K: Tensor  # [3,3]
    viewmats: Tensor  # [T,4,4] world-to-camera
    depth: Tensor  # [T,H,W]
    dynamic_mask: Tensor  # [T,H,W] bool
    track_xy: Tensor  # [T,P,2]
    track_visible: Tensor  # [T,P] bool
    track_dynamic: Tensor  # [P] bool
    teachers: dict[str, Tensor] = field(default_factory=dict)  # name -> [T,h,w,C]
    world_up: Tensor | None = None  # [3] gravity-up in world coordinates, when the priors know it

    def to(self, device: torch.device) -> "SceneData":
        """A copy with every tensor on ``device``."""
        moved = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        moved = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in moved.items()}
        moved["teachers"] = {k: v.to(device) for k, v in self.teachers.items()}
        return SceneData(**moved)

    @property
    def frames(self) -> int:
        return self.images.shape[0]

    @property
    def height(self) -> int:
        return self.images.shape[1]

    @property
    def width(self) -> int:
        return self.images.shape[2]


def refined_viewmats(scene: Path) -> Tensor | None:
    """The cameras the fit refined (``model/cameras.json``, see :mod:`recon4d.fit.cameras`), or None before any fit."""
    path = SceneFolder(scene).model_cameras
    if not path.exists():
        return None
    return torch.tensor(json.loads(path.read_text())["viewmats"], dtype=torch.float32)


def load_scene_data(scene: Path, cameras: str = "fitted") -> SceneData:
    """Frames and priors of a scene folder as tensors.

    ``cameras="fitted"`` takes the cameras refined by the fit (``model/cameras.json``)
    when there are any, which is what every command reading a finished fit needs;
    the optimiser itself asks for ``"priors"``, because it learns its corrections
    on top of those.
    """
    if cameras not in ("fitted", "priors"):
        raise ValueError(f"cameras must be 'fitted' or 'priors', not {cameras!r}")
    scene = Path(scene)
    folder = SceneFolder(scene)
    how = f"run `recon4d fit --video <input> --out {scene.parent} --stop-after priors` first"
    folder.require(folder.frames_json, how)
    files = sorted(folder.frames.glob("*.jpg")) or sorted(folder.frames.glob("*.png"))
    if not files:
        raise MissingStageError(f"no frames in {folder.frames}; {how}")
    images = np.stack([cv2.cvtColor(cv2.imread(str(f)), cv2.COLOR_BGR2RGB) for f in files])
    camera = json.loads(folder.require(folder.camera, how).read_text())
    depth_file = np.load(folder.require(folder.depth, how))
    masks = np.load(folder.require(folder.masks, how))["dynamic"]
    depth = depth_file["depth"]
    if from_sparse_fallback(depth_file):  # objects: background's depth
        depth = objects_at_contact_depth(depth, masks)
    tracks = np.load(folder.require(folder.tracks, how))
    teachers = read_teachers(scene)
    T = images.shape[0]
    fitted = refined_viewmats(scene) if cameras == "fitted" else None
    if fitted is not None and len(fitted) == len(camera["viewmats"]):
        camera["viewmats"] = fitted
    if not (len(camera["viewmats"]) == depth.shape[0] == masks.shape[0] == T):
        raise MissingStageError(
            f"{scene}: frames ({T}), cameras ({len(camera['viewmats'])}), depth ({depth.shape[0]}) and "
            f"masks ({masks.shape[0]}) disagree in length; re-run the priors stage"
        )
    return SceneData(
        images=torch.from_numpy(images).float() / 255.0,
        K=torch.tensor(camera["K"], dtype=torch.float32),
        viewmats=torch.as_tensor(camera["viewmats"], dtype=torch.float32),
        depth=torch.from_numpy(depth).float(),
        dynamic_mask=torch.from_numpy(masks).bool(),
        track_xy=torch.from_numpy(tracks["xy"]).float(),
        track_visible=torch.from_numpy(tracks["visible"]).bool(),
        track_dynamic=torch.from_numpy(tracks["dynamic"]).bool(),
        teachers=teachers,
        world_up=torch.tensor(camera["world_up"], dtype=torch.float32) if "world_up" in camera else None,
    )
