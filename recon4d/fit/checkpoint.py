"""A fit's checkpoint: its files, writing and reading them, and making whole a checkpoint a kill split
between two saves.

``Trainer.save`` writes the parts with :func:`write_checkpoint`, each tagged with one checkpoint id;
``Trainer.load`` reads them with :func:`read_checkpoint`, which first calls :func:`complete_checkpoint`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from safetensors import SafetensorError
from torch import Tensor, nn

from recon4d.errors import UserError
from recon4d.fit.cameras import PoseRefinement
from recon4d.io.atomic import atomic_group, staged_path
from recon4d.scene import DynamicScene
from recon4d.scene.state import load_scene, tensors_checkpoint, write_scene
from recon4d.scene_folder import CAMERAS_FILE, OPTIMIZER_FILE, SCENE_META, SCENE_TENSORS


class CheckpointError(UserError, RuntimeError):
    """The parts of a checkpoint come from different saves, and no staged part can make them whole."""


CHECKPOINT_FILES = (OPTIMIZER_FILE, CAMERAS_FILE, SCENE_TENSORS, SCENE_META)
"""The parts of a checkpoint, in the order ``Trainer.save`` renames them into place: scene.json, whose presence
says that a checkpoint exists (``fit_scene``, ``recon4d fit``), last."""


def _checkpoint_of(path: Path) -> str | None:
    """The checkpoint id a scene.safetensors, scene.json or cameras.json was saved with (None: saved without
    one, by a version before the ids, or no such file: checkpoints older still had no cameras.json)."""
    if not path.exists():
        return None
    if path.suffix == ".safetensors":
        return tensors_checkpoint(path)
    return json.loads(path.read_text()).get("checkpoint")


def _staged_checkpoint_of(path: Path) -> str | None:
    """``_checkpoint_of`` the staged version of ``path``; None also for the truncated tensors of a save
    killed while it wrote them (json files are staged atomically: never truncated)."""
    try:
        return _checkpoint_of(staged_path(path))
    except SafetensorError:
        return None


def complete_checkpoint(model_dir: Path, newest: str | None) -> None:
    """Make the checkpoint in ``model_dir`` whole: finish the renames of a save that a kill interrupted, or
    raise ``CheckpointError``. ``newest`` is the id in optimizer.pt, the part renamed first.

    Why finish the newer save rather than fall back to the older one: the renames start
    only once every part is written whole to its staged name, so parts that disagree
    mean that the newer checkpoint is complete on disk, some parts in place and the
    others staged, while the older one has already lost the parts that were replaced.
    Parts that disagree with no staged part to match (a fresh fit killed while staging
    over a split checkpoint, files copied by hand) leave nothing consistent: that is an
    error saying so, not a resume from a mix of two steps.
    """
    for name in CHECKPOINT_FILES[1:]:
        path = model_dir / name
        found = _checkpoint_of(path)
        if found == newest:
            continue
        if _staged_checkpoint_of(path) != newest:
            raise CheckpointError(f"the checkpoint in {model_dir} mixes two saves ({CHECKPOINT_FILES[0]}: {newest}, "
                                  f"{name}: {found}) and no staged {name} completes it; delete {model_dir} to fit "
                                  f"from the start")
        os.replace(staged_path(path), path)


def write_checkpoint(model_dir: Path, checkpoint: str, state: dict, poses: PoseRefinement, K: Tensor,
                     base_viewmats: Tensor, scene: DynamicScene, heads: nn.ModuleDict, meta: dict) -> None:
    """Write the parts (``CHECKPOINT_FILES``) to staged names, then rename them into place
    (``atomic_group``), all tagged with the id ``checkpoint``: ``state`` (optimiser, densification
    statistics, RNG) to optimizer.pt, the pose corrections, the scene and heads with ``meta``."""
    parts = [model_dir / name for name in CHECKPOINT_FILES]
    with atomic_group(parts) as (state_file, cameras, tensors, scene_meta):
        torch.save({"checkpoint": checkpoint, **state}, state_file)
        poses.save(cameras, K, base_viewmats, checkpoint)
        write_scene(tensors, scene_meta, scene, heads, meta)


def read_checkpoint(model_dir: Path, frames: int) -> tuple[dict, DynamicScene, nn.ModuleDict, PoseRefinement, dict]:
    """The checkpoint in ``model_dir``, first made whole (``complete_checkpoint``): optimizer.pt's state,
    the scene, the heads, the pose corrections of ``frames`` frames and the scene's meta, all on the CPU."""
    # The state is read to the CPU whatever device wrote it (a GPU fit resumes on a laptop); the optimiser's
    # load_state_dict moves its moments to the parameters' device.
    state = torch.load(model_dir / CHECKPOINT_FILES[0], weights_only=False, map_location="cpu")
    complete_checkpoint(model_dir, state.get("checkpoint"))
    scene, heads, meta = load_scene(model_dir)
    poses = PoseRefinement(frames)
    poses.load(model_dir / CAMERAS_FILE)
    return state, scene, heads, poses, meta


def rng_states(device: torch.device) -> dict[str, Tensor]:
    """The generators a step may draw from (the split offsets of densification): the CPU's and, when the
    fit runs on a GPU, the device's, since the offsets are drawn where the Gaussians are."""
    states = {"torch_rng": torch.get_rng_state()}
    if device.type == "cuda":
        states["cuda_rng"] = torch.cuda.get_rng_state(device)
    return states


def restore_rng(state: dict, device: torch.device) -> None:
    """Set the generators ``rng_states`` saved in ``state`` (the device's only when it is a GPU again)."""
    torch.set_rng_state(state["torch_rng"])
    if "cuda_rng" in state and device.type == "cuda":
        torch.cuda.set_rng_state(state["cuda_rng"], device)
