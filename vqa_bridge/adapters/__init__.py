"""VLM adapters behind one interface (``VisionLanguageAdapter``); ``load_adapter`` picks one by CLI name."""

from __future__ import annotations

import torch

from vqa_bridge.adapters.base import Generation, VisionLanguageAdapter, VisionTokens

MODELS = ("tiny", "qwen2.5-vl", "internvl", "internvideo2")


def load_adapter(name: str, model_path: str | None = None, vision_only: bool = False,
                 device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> VisionLanguageAdapter:
    """``tiny`` needs nothing; the real models need ``model_path`` (a local directory or a hub id).

    ``vision_only`` is a hint for teacher extraction: adapters that can, skip the language model.
    ``device``/``dtype``: where the real models run (default CUDA in bf16 when there is
    a GPU, else CPU in float32; ``vqa_bridge.adapters.hf_native.placement``).
    """
    if name == "tiny":
        from vqa_bridge.adapters.tiny import tiny_adapter

        return tiny_adapter()
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
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


__all__ = ["MODELS", "Generation", "VisionLanguageAdapter", "VisionTokens", "load_adapter"]
