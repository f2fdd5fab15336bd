"""Teacher-feature cache format (extraction itself belongs to the VQA bridge).

``priors/teachers/<name>.safetensors`` holds ``features`` [T, h, w, C] (float16)
and optionally ``cls`` [T, C]; the metadata records the teacher name and its
input size so a decoder head knows which resolution it is supervised at.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from recon4d.io.atomic import atomic_path


def teacher_path(scene: Path, name: str) -> Path:
    return Path(scene) / "priors" / "teachers" / f"{name}.safetensors"


def save_teacher(scene: Path, name: str, features: np.ndarray, cls: np.ndarray | None = None,
                 input_size: tuple[int, int] | None = None) -> Path:
    tensors = {"features": torch.as_tensor(features, dtype=torch.float16).contiguous()}
    if cls is not None:
        tensors["cls"] = torch.as_tensor(cls, dtype=torch.float16).contiguous()
    meta = {"teacher": name, "input_size": "" if input_size is None else f"{input_size[0]}x{input_size[1]}"}
    path = teacher_path(scene, name)
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp), metadata=meta)
    return path


def load_teacher(scene: Path, name: str) -> dict[str, torch.Tensor]:
    return load_file(str(teacher_path(scene, name)))
