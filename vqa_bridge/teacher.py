"""Teacher extraction: a VLM's vision-encoder tokens for every frame of a scene, for `recon4d fit` to distil.

Encoders with a fixed clip length (InternVideo2: 8 frames) see consecutive clips;
the last one is padded by repeating its final frame and the padding is dropped.
Encoders that treat frames independently (Qwen2.5-VL) see batches of frames.
Encoders with a CLS token also keep the CLS of the clip VLM4D would sample from
the input video: the field renders no CLS, so the feature-field modality
prepends this one (key ``cls`` beside ``features``; the fit reads only
``features``).
"""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file
from torch import Tensor

from recon4d.io.atomic import atomic_path
from vqa_bridge.adapters.base import VisionLanguageAdapter
from vqa_bridge.modalities import sample_indices

# Frames per encoder call for encoders without a clip length (bounds memory, not results).
BATCH_FRAMES = 16


def extract_teacher(adapter: VisionLanguageAdapter, frames: Tensor) -> tuple[Tensor, Tensor | None]:
    """(features [T,h,w,C] float32, CLS [C] or None) for frames [T,H,W,3]."""
    T = frames.shape[0]
    step = adapter.clip_frames or BATCH_FRAMES
    grids = []
    for start in range(0, T, step):
        chunk = frames[start:start + step]
        if adapter.clip_frames and chunk.shape[0] < step:
            chunk = torch.cat([chunk, chunk[-1:].expand(step - chunk.shape[0], -1, -1, -1)])
        grids.append(adapter.extract_tokens(chunk).grid[: T - start])
    cls = None
    if adapter.clip_frames:
        cls = adapter.extract_tokens(frames[sample_indices(T, min(T, adapter.clip_frames))]).cls
    return torch.cat(grids).float(), cls


def write_teacher_file(scene: Path, name: str, features: Tensor, cls: Tensor | None) -> Path:
    """``<scene>/priors/teachers/<name>.safetensors``, written atomically."""
    path = Path(scene) / "priors" / "teachers" / f"{name}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    tensors = {"features": features.float().contiguous()}
    if cls is not None:
        tensors["cls"] = cls.float().contiguous()
    with atomic_path(path) as tmp:
        save_file(tensors, str(tmp))
    return path
