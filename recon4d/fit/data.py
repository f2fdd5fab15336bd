"""SceneData: everything the optimiser reads from a scene folder (frames + priors), as tensors.

The folder contract is in ../shared/DESIGN.md; this is its only reader on the fit side,
so a change of file format touches one module.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

import cv2
import numpy as np
import torch
from safetensors.torch import load_file
from torch import Tensor

from recon4d.errors import UserError
from recon4d.fit.cameras import refined_viewmats
from recon4d.priors.depth import SparseDepth, objects_at_contact_depth


class MissingStageError(UserError, RuntimeError):
    """A scene folder lacks the output of an earlier stage; the message says how to make it."""


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


def _require(path: Path, how: str) -> Path:
    if not path.exists():
        raise MissingStageError(f"{path} is missing; {how}")
    return path


def frames_info(scene: Path) -> dict:
    """``<scene>/frames.json``: fps, size, source (the input path) and source frame indices."""
    path = Path(scene) / "frames.json"
    return json.loads(path.read_text()) if path.exists() else {}


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
    how = f"run `recon4d fit --video <input> --out {scene.parent} --stop-after priors` first"
    _require(scene / "frames.json", how)
    files = sorted((scene / "frames").glob("*.jpg")) or sorted((scene / "frames").glob("*.png"))
    if not files:
        raise MissingStageError(f"no frames in {scene / 'frames'}; {how}")
    images = np.stack([cv2.cvtColor(cv2.imread(str(f)), cv2.COLOR_BGR2RGB) for f in files])
    camera = json.loads(_require(scene / "priors" / "camera.json", how).read_text())
    depth_file = np.load(_require(scene / "priors" / "depth.npz", how))
    masks = np.load(_require(scene / "priors" / "masks.npz", how))["dynamic"]
    depth = depth_file["depth"]
    if "provider" in depth_file.files and str(depth_file["provider"]) == SparseDepth.name:  # objects: background's depth
        depth = objects_at_contact_depth(depth, masks)
    tracks = np.load(_require(scene / "priors" / "tracks.npz", how))
    teachers = {
        f.stem: load_file(str(f))["features"].float()
        for f in sorted((scene / "priors" / "teachers").glob("*.safetensors"))
    }
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
