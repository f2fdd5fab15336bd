"""The files of a fit's checkpoint, and how a checkpoint a kill split between two saves is made whole.

``Trainer.save`` writes the parts with :func:`recon4d.io.atomic.atomic_group`, each tagged with one
checkpoint id; ``Trainer.load`` calls :func:`complete_checkpoint` before reading them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from safetensors import SafetensorError

from recon4d.errors import UserError
from recon4d.io.atomic import staged_path
from recon4d.scene.state import tensors_checkpoint
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
