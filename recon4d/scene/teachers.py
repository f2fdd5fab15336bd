"""The teacher files of a scene folder, ``priors/teachers/<name>.safetensors``: their one writer and reader.

A teacher's file holds its token maps for every frame (key ``features``, float32 [T, h, w, C])
and, for encoders with one, the video's CLS token (key ``cls``, [C]). ``recon4d vqa extract``
and the fit's built-in ``patch`` teacher write them; the fit distils every ``features`` found,
and the feature-field modality prepends the ``cls``.
"""

from __future__ import annotations

from pathlib import Path

from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import Tensor

from recon4d.io.atomic import atomic_path
from recon4d.scene_folder import SceneFolder


def write_teacher(scene: Path, name: str, features: Tensor, cls: Tensor | None = None) -> Path:
    """``<scene>/priors/teachers/<name>.safetensors``, written atomically."""
    path = SceneFolder(scene).teacher(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {"features": features.float().contiguous()}
    if cls is not None:
        tensors["cls"] = cls.float().contiguous()
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp))
    return path


def read_teachers(scene: Path) -> dict[str, Tensor]:
    """Every cached teacher's ``features`` [T, h, w, C] (float32), by name, in name order."""
    return {
        f.stem: load_file(str(f))["features"].float()
        for f in sorted(SceneFolder(scene).teachers.glob("*.safetensors"))
    }


def read_teacher_cls(scene: Path, name: str) -> Tensor | None:
    """The CLS token saved with teacher ``name`` (None: its encoder has none)."""
    with safe_open(str(SceneFolder(scene).teacher(name)), framework="pt") as f:
        return f.get_tensor("cls") if "cls" in f.keys() else None
