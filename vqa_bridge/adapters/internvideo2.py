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

Teacher extraction loads the vision encoder alone: the model is built on the
meta device (no memory, no LLM download) and only ``vision_encoder.*`` weights
are read from the checkpoint shards.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vqa_bridge.adapters.base import VisionLanguageAdapter, VisionTokens, cpu_threads

# InternVideo2-Chat's demo normalises 224x224 frames with the ImageNet constants.
IV2_MEAN = (0.485, 0.456, 0.406)
IV2_STD = (0.229, 0.224, 0.225)


class FixedVisionOutput(nn.Module):
    """Stands in for ``vision_encoder``: returns the given [1, 1 + T*L, C] tokens whatever the input."""

    def __init__(self, tokens: Tensor):
        super().__init__()
        self.tokens = tokens

    def forward(self, image: Tensor, use_image: bool = False) -> Tensor:
        return self.tokens.to(image.device)


class InternVideo2Adapter(VisionLanguageAdapter):
    """``model`` has InternVideo2-Chat's layout; ``model.lm`` may be absent when only extracting."""

    teacher_name = "internvideo2"

    def __init__(self, model: nn.Module, tokenizer=None, image_size: int = 224, clip_frames: int = 8):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.image_size = image_size
        self.clip_frames = clip_frames

    def _video(self, frames: Tensor) -> Tensor:
        """[T,H,W,3] in [0,1] -> [1, T, 3, S, S] normalised, the layout ``pad_text_embeds`` takes."""
        x = F.interpolate(frames.permute(0, 3, 1, 2).float(), size=(self.image_size, self.image_size),
                          mode="bicubic", align_corners=False, antialias=True)
        mean, std = torch.tensor(IV2_MEAN).view(1, 3, 1, 1), torch.tensor(IV2_STD).view(1, 3, 1, 1)
        dtype = next(self.model.vision_encoder.parameters()).dtype
        return ((x - mean) / std)[None].to(dtype)

    @cpu_threads
    @torch.no_grad()
    def extract_tokens(self, frames: Tensor) -> VisionTokens:
        T = frames.shape[0]
        out = self.model.vision_encoder(self._video(frames).permute(0, 2, 1, 3, 4), use_image=T == 1)[0].float()
        side = int(round(((out.shape[0] - 1) / T) ** 0.5))
        return VisionTokens(out[1:].reshape(T, side, side, -1), cls=out[0])

    @contextmanager
    def _encoder_output(self, tokens: VisionTokens):
        """Temporarily replace the vision encoder by the given tokens (CLS first, then frame-major rows)."""
        if tokens.cls is None:
            raise ValueError("InternVideo2 needs a CLS token in front of the frame tokens")
        flat = torch.cat([tokens.cls[None], tokens.grid.reshape(-1, tokens.grid.shape[-1])])[None]
        encoder = self.model.vision_encoder
        self.model.vision_encoder = FixedVisionOutput(flat.to(next(encoder.parameters()).dtype))
        try:
            yield
        finally:
            self.model.vision_encoder = encoder

    def _inputs(self, prompt: str) -> tuple[Tensor, Tensor, Tensor]:
        """Mistral instruction layout with one run of placeholders the Q-Former queries overwrite."""
        n_query = self.model.query_tokens.shape[1] + getattr(self.model, "extra_num_query_token", 0)
        tok = self.tokenizer
        before = tok("[INST] <Video>", add_special_tokens=True)["input_ids"]
        after = tok(f"</Video> {prompt} [/INST]", add_special_tokens=False)["input_ids"]
        ids = torch.tensor([before + [tok.unk_token_id or 0] * n_query + after])
        video_idx = torch.zeros_like(ids)
        video_idx[0, len(before):len(before) + n_query] = 1
        return ids, torch.ones_like(ids), video_idx

    def _logits(self, video: Tensor, prompt: str) -> Tensor:
        ids, mask, video_idx = self._inputs(prompt)
        embeds = self.model.pad_text_embeds(input_ids=ids, video=video, video_idx=video_idx)
        return self.model.lm(inputs_embeds=embeds, attention_mask=mask).logits[0].float()

    def _answer(self, video: Tensor, prompt: str, max_new_tokens: int) -> str:
        ids, mask, video_idx = self._inputs(prompt)
        out = self.model.generate_caption(ids, mask, video_idx=video_idx, video=video, do_sample=False,
                                          max_new_tokens=max_new_tokens, num_beams=1)
        return self.tokenizer.decode(out[0], skip_special_tokens=True)

    def _placeholder(self, tokens: VisionTokens) -> Tensor:
        """A pixel tensor of the right clip shape; its values are never read (the encoder is replaced)."""
        return torch.zeros(1, tokens.grid.shape[0], 3, self.image_size, self.image_size)

    @cpu_threads
    @torch.no_grad()
    def logits_from_frames(self, frames: Tensor, prompt: str) -> Tensor:
        return self._logits(self._video(frames), prompt)

    @cpu_threads
    @torch.no_grad()
    def logits_from_tokens(self, tokens: VisionTokens, prompt: str) -> Tensor:
        with self._encoder_output(tokens):
            return self._logits(self._placeholder(tokens), prompt)

    @cpu_threads
    @torch.no_grad()
    def answer_from_frames(self, frames: Tensor, prompt: str, max_new_tokens: int) -> str:
        return self._answer(self._video(frames), prompt, max_new_tokens)

    @cpu_threads
    @torch.no_grad()
    def answer_from_tokens(self, tokens: VisionTokens, prompt: str, max_new_tokens: int) -> str:
        with self._encoder_output(tokens):
            return self._answer(self._placeholder(tokens), prompt, max_new_tokens)


def load_internvideo2(path: str, vision_only: bool = False, dtype: torch.dtype = torch.bfloat16) -> InternVideo2Adapter:
    """InternVideo2-Chat from a local directory or hub id, with the model's own remote code.

    ``vision_only`` (teacher extraction) builds the model skeleton on the meta device and
    materialises just ``vision_encoder`` from the checkpoint, so the 7B LLM is never loaded.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    if not vision_only:
        model = AutoModel.from_pretrained(path, trust_remote_code=True, dtype=dtype)
        return InternVideo2Adapter(model, AutoTokenizer.from_pretrained(path, trust_remote_code=True))
    config = AutoConfig.from_pretrained(path, trust_remote_code=True)
    with torch.device("meta"):
        model = AutoModel.from_config(config, trust_remote_code=True)
    encoder = model.vision_encoder.to_empty(device="cpu")
    encoder.load_state_dict(_vision_weights(Path(path)), strict=True)
    model.vision_encoder = encoder.to(dtype)
    return InternVideo2Adapter(model)


def _vision_weights(folder: Path) -> dict[str, Tensor]:
    """``vision_encoder.*`` tensors from a (possibly sharded) safetensors checkpoint, prefix removed."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if index.exists():
        shards = sorted({f for k, f in json.loads(index.read_text())["weight_map"].items()
                         if k.startswith("vision_encoder.")})
    else:
        shards = ["model.safetensors"]
    weights = {}
    for shard in shards:
        with safe_open(str(folder / shard), framework="pt") as f:
            for key in f.keys():
                if key.startswith("vision_encoder."):
                    weights[key[len("vision_encoder."):]] = f.get_tensor(key)
    if not weights:
        raise FileNotFoundError(f"no vision_encoder.* weights in {folder}")
    return weights
