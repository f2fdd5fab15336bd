"""VLM adapters behind one interface (``VisionLanguageAdapter``); ``load_adapter`` picks one by CLI name.

``ModelName`` is the one list of model names: every command that takes ``--model`` or
``--vlm`` types its option with it, so a new adapter appears everywhere at once.
``DtypeName`` and ``resolve_placement`` give the commands' ``--device`` / ``--dtype``.
"""

from __future__ import annotations

from typing import Literal, get_args

import torch

from vqa_bridge.adapters.base import Generation, VisionLanguageAdapter, VisionTokens

ModelName = Literal["tiny", "qwen2.5-vl", "internvl", "internvideo2"]
MODELS: tuple[str, ...] = get_args(ModelName)
DtypeName = Literal["auto", "float32", "bfloat16", "float16"]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_placement(device: str = "auto", dtype: str = "auto") -> tuple[torch.device, torch.dtype]:
    """``--device`` (auto, cpu, cuda, cuda:N) and ``--dtype`` (auto: bf16 on CUDA, float32 on the CPU).

    ``auto`` goes through ``recon4d.device.resolve_device``, so a GPU that torch cannot use is
    an error naming the fix, as it is for the fit, rather than a silent CPU run.
    """
    from recon4d.device import resolve_device
    from vqa_bridge.adapters.hf_native import placement

    if dtype != "auto" and dtype not in DTYPES:
        raise ValueError(f"--dtype {dtype!r}: choose auto or one of {', '.join(DTYPES)}")
    return placement(resolve_device(device), None if dtype == "auto" else DTYPES[dtype])


def load_adapter(name: str, model_path: str | None = None, vision_only: bool = False,
                 device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> VisionLanguageAdapter:
    """``tiny`` needs nothing; the real models need ``model_path`` (a local directory or a hub id).

    ``vision_only`` is a hint for teacher extraction: adapters that can, skip the language model.
    ``device``/``dtype``: where the model runs (default CUDA in bf16 when there is
    a GPU, else CPU in float32; ``vqa_bridge.adapters.hf_native.placement``); every
    adapter builds its inputs on the model's device.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    if name == "tiny":
        from vqa_bridge.adapters.tiny import tiny_adapter

        return tiny_adapter(device=device, dtype=dtype)
    if not model_path:
        raise ValueError(f"--model {name} needs --model-path (a local checkpoint directory or hub id)")
    if name == "qwen2.5-vl":
        from vqa_bridge.adapters.qwen import load_qwen2_5_vl

        return load_qwen2_5_vl(model_path, device=device, dtype=dtype)
    if name == "internvl":
        from vqa_bridge.adapters.internvl import load_internvl

        return load_internvl(model_path, device=device, dtype=dtype)
    from vqa_bridge.adapters.internvideo2 import load_internvideo2

    return load_internvideo2(model_path, vision_only=vision_only, device=device, dtype=dtype)


__all__ = ["DTYPES", "MODELS", "DtypeName", "Generation", "ModelName", "VisionLanguageAdapter", "VisionTokens",
           "load_adapter", "resolve_placement"]
