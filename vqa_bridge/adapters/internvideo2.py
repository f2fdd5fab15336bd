"""InternVideo2-Chat (the reference VLM) through its own remote code, split at the vision encoder.

The remote model (``InternVideo2_VideoChat2``) encodes a clip with
``vision_encoder`` ([B,C,T,H,W] -> [B, 1 + T*L, C], CLS first, tokens frame by
frame), then ``encode_vision`` applies ``vision_layernorm`` and the Q-Former
(``qformer.bert`` with ``query_tokens`` + ``extra_query_tokens``), and
``pad_text_embeds`` writes ``project_up`` of the queries into the LLM's input
embeddings where ``video_idx`` is 1. The feature-field path swaps
``vision_encoder`` for a module that returns the given tokens, so they enter
before the layer-norm and Q-Former and everything after it is the model's own
code (DESIGN.md, "InternVideo2-Chat-8B teacher").

Questions are laid out as the model's own ``chat()`` lays them out, and answers
are decoded greedily whatever the checkpoint's generation config says.

``load_internvideo2`` runs the checkpoint's own code under the project's
transformers, offline (``internvideo2_compat`` says what that takes). Teacher
extraction loads the vision encoder alone: the model is built on the meta device
(no memory, no LLM download) and only ``vision_encoder.*`` weights are read from
the checkpoint shards.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vqa_bridge.adapters.base import VisionLanguageAdapter, VisionTokens, cpu_threads, describe_placement
from vqa_bridge.adapters.hf_native import GREEDY, make_greedy, placement
from vqa_bridge.adapters.internvideo2_compat import CHECKPOINT_KEY_MAPPING, build_skeleton, remote_model_class

# InternVideo2-Chat's demo normalises 224x224 frames with the ImageNet constants.
IV2_MEAN = (0.485, 0.456, 0.406)
IV2_STD = (0.229, 0.224, 0.225)


class FixedVisionOutput(nn.Module):
    """Stands in for ``vision_encoder``: returns the given [1, 1 + T*L, C] tokens whatever the input.

    The tokens are put on the model's device when they are set, so the placeholder pixels'
    device does not matter.
    """

    def __init__(self, tokens: Tensor):
        super().__init__()
        self.tokens = tokens

    def forward(self, image: Tensor, use_image: bool = False) -> Tensor:
        return self.tokens


# What ``generate_caption`` is called with: greedy. Its own defaults sample (``do_sample=True, top_p=0.9,
# temperature=1.0``); it always passes ``min_length=1, repetition_penalty=1.0, length_penalty=1`` (neutral).
CAPTION_GREEDY = {k: GREEDY[k] for k in ("do_sample", "num_beams", "temperature", "top_p", "top_k")}


class InternVideo2Adapter(VisionLanguageAdapter):
    """``model`` has InternVideo2-Chat's layout; ``model.lm`` may be absent when only extracting.

    Every input is built on the device of the model's parameters (the vision encoder's for
    pixels, the LLM embeddings' for token ids), so a model moved to a GPU needs nothing else.
    """

    teacher_name = "internvideo2"

    def __init__(self, model: nn.Module, tokenizer=None, image_size: int = 224, clip_frames: int = 8):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.image_size = image_size
        self.clip_frames = clip_frames
        self.overridden: dict = {}
        if tokenizer is not None:  # a model for answering: its LLM's generation config made greedy
            self.overridden = make_greedy(_base_lm(model.lm), tokenizer.pad_token_id or tokenizer.eos_token_id)

    def _vision_param(self) -> Tensor:
        return next(self.model.vision_encoder.parameters())

    def placement(self) -> dict[str, str]:
        """The vision encoder's: a ``vision_only`` model's LLM stays on the meta device."""
        return describe_placement(self._vision_param())

    def _video(self, frames: Tensor) -> Tensor:
        """[T,H,W,3] in [0,1] -> [1, T, 3, S, S] normalised on the encoder's device, the layout ``pad_text_embeds`` takes."""
        param = self._vision_param()
        x = frames.to(param.device).permute(0, 3, 1, 2).float()
        x = F.interpolate(x, size=(self.image_size, self.image_size), mode="bicubic", align_corners=False,
                          antialias=True)
        mean = torch.tensor(IV2_MEAN, device=param.device).view(1, 3, 1, 1)
        std = torch.tensor(IV2_STD, device=param.device).view(1, 3, 1, 1)
        return ((x - mean) / std)[None].to(param.dtype)

    @cpu_threads
    @torch.no_grad()
    def extract_tokens(self, frames: Tensor) -> VisionTokens:
        T = frames.shape[0]
        out = self.model.vision_encoder(self._video(frames).permute(0, 2, 1, 3, 4), use_image=T == 1)[0].float()
        side = int(round(((out.shape[0] - 1) / T) ** 0.5))
        return VisionTokens(out[1:].reshape(T, side, side, -1), cls=out[0])

    @contextmanager
    def _tokens_in_place(self, tokens: VisionTokens):
        """Temporarily replace the vision encoder by the given tokens (CLS first, then frame-major rows)."""
        if tokens.cls is None:
            raise ValueError("InternVideo2 needs a CLS token in front of the frame tokens")
        param = self._vision_param()
        flat = torch.cat([tokens.cls[None], tokens.grid.reshape(-1, tokens.grid.shape[-1])])[None]
        encoder = self.model.vision_encoder
        self.model.vision_encoder = FixedVisionOutput(flat.to(device=param.device, dtype=param.dtype))
        try:
            yield
        finally:
            self.model.vision_encoder = encoder

    def _inputs(self, prompt: str) -> tuple[Tensor, Tensor, Tensor]:
        """Token ids, attention mask and ``video_idx`` [1, L] as the model's own ``chat()`` builds them.

        ``chat()`` writes ``[INST] <Video>{placeholder}</Video>[/INST] [INST] {question} [/INST]``
        (an empty system message, no history) and ``build_input_ids`` tokenises the text on
        each side of the placeholder separately, special tokens included (so the second part
        starts with its own BOS), with one id-0 slot per Q-Former query in between.
        """
        n_query = self.model.query_tokens.shape[1] + getattr(self.model, "extra_num_query_token", 0)
        tok = self.tokenizer
        before = tok("[INST] <Video>")["input_ids"]
        after = tok(f"</Video>[/INST] [INST] {prompt} [/INST]")["input_ids"]
        device = self.model.lm.get_input_embeddings().weight.device
        ids = torch.tensor([before + [0] * n_query + after], device=device)
        video_idx = torch.zeros_like(ids)
        video_idx[0, len(before):len(before) + n_query] = 1
        return ids, torch.ones_like(ids), video_idx

    def frame_inputs(self, frames: Tensor, prompt: str) -> tuple[Tensor, str]:
        """The normalised clip and the prompt; the ids are built where they are used (``_inputs``)."""
        return self._video(frames), prompt

    def token_inputs(self, tokens: VisionTokens, prompt: str) -> tuple[Tensor, str]:
        """A placeholder clip of the tokens' length (``_tokens_in_place`` supplies the tokens) and the prompt."""
        return self._placeholder(tokens), prompt

    def _logits(self, inputs: tuple[Tensor, str]) -> Tensor:
        video, prompt = inputs
        ids, mask, video_idx = self._inputs(prompt)
        embeds = self.model.pad_text_embeds(input_ids=ids, video=video, video_idx=video_idx)
        return self.model.lm(inputs_embeds=embeds, attention_mask=mask).logits[0].float()

    def _generate(self, inputs: tuple[Tensor, str], max_new_tokens: int) -> str:
        video, prompt = inputs
        ids, mask, video_idx = self._inputs(prompt)
        out = self.model.generate_caption(ids, mask, video_idx=video_idx, video=video,
                                          max_new_tokens=max_new_tokens, **CAPTION_GREEDY)
        return self.tokenizer.decode(out[0], skip_special_tokens=True)

    def _placeholder(self, tokens: VisionTokens) -> Tensor:
        """A pixel tensor of the right clip shape; its values are never read (the encoder is replaced)."""
        return torch.zeros(1, tokens.grid.shape[0], 3, self.image_size, self.image_size,
                           device=self._vision_param().device)

    def run_settings(self) -> dict:
        return {"generate": {**{k: v for k, v in CAPTION_GREEDY.items() if v is not None},
                             "min_length": 1, "repetition_penalty": 1.0},
                "checkpoint_generation_overridden": self.overridden,
                "prompt": "[INST] <Video>{queries}</Video>[/INST] [INST] {question} [/INST]"}


def _base_lm(lm: nn.Module) -> nn.Module:
    """The transformers model under a peft wrapper (whose ``generate`` uses the inner model's generation config)."""
    return lm.get_base_model() if hasattr(lm, "get_base_model") else lm


def load_internvideo2(path: str, vision_only: bool = False, device: str | torch.device | None = None,
                      dtype: torch.dtype | None = None) -> InternVideo2Adapter:
    """InternVideo2-Chat from a local directory or hub id, with the model's own remote code.

    ``device`` defaults to CUDA when there is one, ``dtype`` to bfloat16 there and float32 on
    the CPU. Runs offline: the LLM and Q-Former configs the code would look up on the hub are
    local (``internvideo2_compat``). ``vision_only`` (teacher extraction) builds the model
    skeleton on the meta device and materialises just ``vision_encoder`` from the checkpoint,
    so the 7B LLM is never loaded (and, for a hub id, its shards never downloaded).
    """
    from transformers import AutoTokenizer

    device, dtype = placement(device, dtype)
    folder = _local_folder(path, vision_only)
    model_class = remote_model_class(folder)
    frames = json.loads((folder / "config.json").read_text())["model_config"]["vision_encoder"]["num_frames"]
    if vision_only:
        model = build_skeleton(model_class, folder)
        encoder = model.vision_encoder.to_empty(device=device)
        encoder.load_state_dict(_vision_weights(folder), strict=True)
        model.vision_encoder = encoder.to(dtype)
        return InternVideo2Adapter(model, clip_frames=frames)
    model, info = model_class.from_pretrained(folder, dtype=dtype, key_mapping=CHECKPOINT_KEY_MAPPING,
                                              output_loading_info=True)
    problems = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys", "mismatched_keys") and v}
    if problems:
        raise ValueError(f"InternVideo2 checkpoint {folder} does not match the model its code builds: {problems}")
    # The checkpoint's config names its own config class (auto_map), whose code this loader runs anyway.
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    return InternVideo2Adapter(model.to(device), tokenizer, clip_frames=frames)


def _local_folder(path: str, vision_only: bool) -> Path:
    """A local checkpoint folder: ``path`` itself, or the hub snapshot of that id (for ``vision_only``
    without the shards that hold no vision-encoder weights)."""
    if Path(path).is_dir():
        return Path(path)
    from huggingface_hub import snapshot_download

    folder = Path(snapshot_download(path, allow_patterns=["*.py", "*.json", "*.model"]))
    shards = ["*.safetensors"]
    if vision_only and (folder / "model.safetensors.index.json").exists():
        shards = _vision_shards(folder)
    return Path(snapshot_download(path, allow_patterns=["*.py", "*.json", "*.model", *shards]))


def _vision_shards(folder: Path) -> list[str]:
    weight_map = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    return sorted({f for k, f in weight_map.items() if k.startswith("vision_encoder.")})


def _vision_weights(folder: Path) -> dict[str, Tensor]:
    """``vision_encoder.*`` tensors from a (possibly sharded) safetensors checkpoint, prefix removed."""
    from safetensors import safe_open

    shards = _vision_shards(folder) if (folder / "model.safetensors.index.json").exists() else ["model.safetensors"]
    weights = {}
    for shard in shards:
        with safe_open(str(folder / shard), framework="pt") as f:
            for key in f.keys():
                if key.startswith("vision_encoder."):
                    weights[key[len("vision_encoder."):]] = f.get_tensor(key)
    if not weights:
        raise FileNotFoundError(f"no vision_encoder.* weights in {folder}")
    return weights
