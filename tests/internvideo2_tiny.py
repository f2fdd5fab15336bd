"""A tiny InternVideo2-Chat checkpoint built at test time from the model's real remote code.

From ``../shared/models/internvideo2-chat-8b`` (skipped when absent) it copies the remote
code and the Mistral tokenizer into a folder, shrinks ``config.json`` and writes seeded
random weights under the parameter names and into the shards that the real
``model.safetensors.index.json`` gives them. What the real code fixes in its source stays
real size: the ViT is 1408 wide with 16 heads at 224 px (only its depth comes from the
config: ``x_vis_return_idx`` -39 keeps 2 of 40 blocks), the Q-Former 768 wide
(``project_up`` is ``Linear(768, ...)``). The config shrinks the clip to 4 frames, the
Q-Former to 2 BERT layers and the Mistral LLM to 2 layers of width 64 (its 32768-token
vocabulary is the tokenizer's).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
REAL = REPO.parent / "shared" / "models" / "internvideo2-chat-8b"
REMOTE_FILES = ("modeling_videochat2.py", "modeling_base.py", "modeling_qformer.py", "modeling_internvideo2_vit.py",
                "model_config.py", "flash_attention_class.py", "tokenizer.json", "tokenizer_config.json")
FRAMES = 4
LLM = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
           max_position_embeddings=2048)
QFORMER = dict(num_hidden_layers=2, intermediate_size=64, vocab_size=30, max_position_embeddings=64)


def real_checkpoint() -> Path:
    """The real checkpoint folder (code, config, index, tokenizer), or skip the test."""
    if not (REAL / "model.safetensors.index.json").exists():
        pytest.skip(f"InternVideo2-Chat reference code not available at {REAL}")
    return REAL


def index_name(name: str) -> str:
    """The name a parameter has in the real index: peft 0.5, which saved it, had no ``base_layer`` level."""
    return name.replace(".base_layer.", ".")


def _random(name: str, shape: torch.Size, gen: torch.Generator) -> torch.Tensor:
    """Weights of the right scale for a signal to pass through 2 layers (a video visibly changes the logits)."""
    if "norm" in name.lower() and name.endswith("weight"):
        return 1 + 0.1 * torch.randn(shape, generator=gen)
    if re.search(r"\.ls[12]$", name):  # the ViT's layer scales
        return 0.5 + 0.1 * torch.randn(shape, generator=gen)
    if name.endswith("position_ids"):
        return torch.arange(shape[-1]).expand(shape).clone()
    fan_in = shape[-1] if len(shape) > 1 else 50
    if name.endswith("patch_embed.proj.weight"):
        fan_in = shape[1] * shape[2] * shape[3] * shape[4]
    return torch.randn(shape, generator=gen) / fan_in ** 0.5


def build_tiny_checkpoint(folder: Path, seed: int = 0) -> Path:
    """Write the tiny checkpoint into ``folder`` and return it."""
    from vqa_bridge.adapters.internvideo2_compat import build_skeleton, remote_model_class

    real = real_checkpoint()
    folder.mkdir(parents=True, exist_ok=True)
    for name in REMOTE_FILES:
        shutil.copy(real / name, folder / name)
    config = json.loads((real / "config.json").read_text())
    model_config = config["model_config"]
    model_config["vision_encoder"].update(num_frames=FRAMES, x_vis_return_idx=-39)
    model_config["llm"]["config_overrides"] = LLM
    model_config["bridge"]["bert_config_overrides"] = QFORMER
    (folder / "config.json").write_text(json.dumps(config, indent=2))

    shard_of = json.loads((real / "model.safetensors.index.json").read_text())["weight_map"]
    skeleton = build_skeleton(remote_model_class(folder), folder)
    gen = torch.Generator().manual_seed(seed)
    shards: dict[str, dict[str, torch.Tensor]] = {}
    for name, param in skeleton.state_dict().items():
        key = index_name(name)
        if key not in shard_of:
            raise KeyError(f"the real code builds {name!r}, which the real checkpoint index does not name")
        shards.setdefault(shard_of[key], {})[key] = _random(key, param.shape, gen)
    from safetensors.torch import save_file

    for shard, tensors in shards.items():
        save_file(tensors, str(folder / shard), metadata={"format": "pt"})
    weight_map = {key: shard for shard, tensors in shards.items() for key in tensors}
    total = sum(t.numel() * t.element_size() for tensors in shards.values() for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2))
    return folder


def saved_weights(folder: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint folder's shards, by index name."""
    from safetensors.torch import load_file

    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    weights = {}
    for shard in sorted(set(index.values())):
        weights.update(load_file(str(folder / shard)))
    return weights
