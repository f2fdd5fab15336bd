"""Qwen2.5-VL and InternVL through the classes that ship inside ``transformers`` (no remote code).

Teacher tokens are the vision tower's hidden states *before* the patch merger,
put back from the tower's window-attention order into frame-major order
[T, h, w, C]. The feature-field path runs the merger on such a map itself and
hands the result to the language model through ``mm_encoder_outputs``, the
hook transformers offers for pre-encoded vision features; positions then come
from the model's own 3-D rope index, so both paths are one computation.

InternVL (``InternVLAdapter``) takes a video as a batch of frames; its teacher
tokens are the vision tower's last hidden state without the CLS row (the
model's "default" feature selection drops it too), and the feature-field path
runs the model's own ``pixel_shuffle`` and ``multi_modal_projector`` on them.

Qwen2.5-VL: each frame fills one temporal slot: it is repeated ``temporal_patch_size``
times, as Qwen2.5-VL does for still images. The tower attends within a slot
only, so a frame's tokens do not depend on its neighbours and per-frame teacher
maps equal the tokens of the same frames inside a video.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.vision_utils import get_vision_window_index

from vqa_bridge.adapters.base import VisionLanguageAdapter, VisionTokens, cpu_threads

# Qwen2.5-VL's image normalisation (the OpenAI CLIP constants its processor uses).
QWEN_MEAN = (0.48145466, 0.4578275, 0.40821073)
QWEN_STD = (0.26862954, 0.26130258, 0.27577711)
# InternVL normalises with the ImageNet constants.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def _resized(frames: Tensor, size: int, mean: tuple, std: tuple) -> Tensor:
    """[T,H,W,3] in [0,1] -> [T,3,size,size], bicubic with antialiasing, normalised."""
    x = F.interpolate(frames.permute(0, 3, 1, 2).float(), size=(size, size), mode="bicubic", align_corners=False,
                      antialias=True)
    return (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)


class QwenVLAdapter(VisionLanguageAdapter):
    """A ``Qwen2_5_VLForConditionalGeneration`` plus a tokenizer with Qwen's vision special tokens."""

    teacher_name = "qwen2_5_vl"

    def __init__(self, model, tokenizer, image_size: int = 224, teacher_name: str | None = None):
        self.model = model.eval()
        self.tokenizer = tokenizer
        vision = model.config.vision_config
        side = vision.patch_size * vision.spatial_merge_size
        if image_size % side:
            raise ValueError(f"image_size {image_size} must be a multiple of patch_size x spatial_merge_size = {side}")
        self.image_size = image_size
        self.vision = vision
        if teacher_name is not None:
            self.teacher_name = teacher_name

    # -- pixels -> vision tower -------------------------------------------------------------
    def _grid(self, frames: int) -> Tensor:
        side = self.image_size // self.vision.patch_size
        return torch.tensor([[frames, side, side]])

    def _pixels(self, frames: Tensor) -> Tensor:
        """[T,H,W,3] in [0,1] -> the flattened patch rows the tower's Conv3d stem expects."""
        x = _resized(frames, self.image_size, QWEN_MEAN, QWEN_STD)
        x = x.repeat_interleave(self.vision.temporal_patch_size, dim=0)
        m, p = self.vision.spatial_merge_size, self.vision.patch_size
        return rearrange(x, "(t tp) c (hb mh ph) (wb mw pw) -> (t hb wb mh mw) (c tp ph pw)",
                         tp=self.vision.temporal_patch_size, mh=m, mw=m, ph=p, pw=p)

    def _window_order(self, grid: Tensor) -> Tensor:
        """Row i of the tower's hidden states holds original patch row ``order[i]``."""
        window_index, _ = get_vision_window_index(grid, self.vision.spatial_merge_size, self.vision.window_size,
                                                  self.vision.patch_size)
        unit = self.vision.spatial_merge_size ** 2
        return (window_index[:, None] * unit + torch.arange(unit)).reshape(-1)

    @cpu_threads
    @torch.no_grad()
    def extract_tokens(self, frames: Tensor) -> VisionTokens:
        grid = self._grid(frames.shape[0])
        visual = self.model.model.visual
        hidden = visual(self._pixels(frames).to(visual.dtype), grid_thw=grid).last_hidden_state
        rows = torch.empty_like(hidden)
        rows[self._window_order(grid)] = hidden
        m, side = self.vision.spatial_merge_size, self.image_size // self.vision.patch_size
        tokens = rearrange(rows, "(t hb wb mh mw) c -> t (hb mh) (wb mw) c", t=frames.shape[0],
                           hb=side // m, wb=side // m, mh=m, mw=m)
        return VisionTokens(tokens.float())

    # -- prompt -----------------------------------------------------------------------------
    def _inputs(self, frames: int, prompt: str) -> dict:
        """Qwen's chat layout with one video; returns input ids, token types and the video grid."""
        grid = self._grid(frames)
        n_video = int(grid.prod()) // self.vision.spatial_merge_size ** 2
        tok = self.tokenizer
        before = tok("<|im_start|>user\n<|vision_start|>", add_special_tokens=False)["input_ids"]
        after = tok(f"<|vision_end|>{prompt}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        ids = torch.tensor([before + [self.model.config.video_token_id] * n_video + after])
        types = torch.zeros_like(ids, dtype=torch.int32)
        types[ids == self.model.config.video_token_id] = 2
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "mm_token_type_ids": types,
                "video_grid_thw": grid}

    def _merged(self, tokens: VisionTokens) -> BaseModelOutputWithPooling:
        """Run the patch merger on a frame-major token map, as the tower does on its own output."""
        m = self.vision.spatial_merge_size
        visual = self.model.model.visual
        rows = rearrange(tokens.grid, "t (hb mh) (wb mw) c -> (t hb wb mh mw) c", mh=m, mw=m)
        merged = visual.merger(rows.to(visual.dtype))
        return BaseModelOutputWithPooling(pooler_output=(merged,))

    # -- language side ----------------------------------------------------------------------
    @cpu_threads
    @torch.no_grad()
    def logits_from_frames(self, frames: Tensor, prompt: str) -> Tensor:
        self.model.model.rope_deltas = None
        inputs = self._inputs(frames.shape[0], prompt)
        return self.model(**inputs, pixel_values_videos=self._pixels(frames)).logits[0].float()

    @cpu_threads
    @torch.no_grad()
    def logits_from_tokens(self, tokens: VisionTokens, prompt: str) -> Tensor:
        self.model.model.rope_deltas = None
        inputs = self._inputs(tokens.grid.shape[0], prompt)
        return self.model(**inputs, mm_encoder_outputs={"video": self._merged(tokens)}).logits[0].float()

    def _generate(self, inputs: dict, max_new_tokens: int, **vision) -> str:
        self.model.model.rope_deltas = None
        out = self.model.generate(**inputs, **vision, max_new_tokens=max_new_tokens, do_sample=False,
                                  pad_token_id=self.tokenizer.pad_token_id)
        return self.tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    @cpu_threads
    @torch.no_grad()
    def answer_from_frames(self, frames: Tensor, prompt: str, max_new_tokens: int) -> str:
        inputs = self._inputs(frames.shape[0], prompt)
        return self._generate(inputs, max_new_tokens, pixel_values_videos=self._pixels(frames))

    @cpu_threads
    @torch.no_grad()
    def answer_from_tokens(self, tokens: VisionTokens, prompt: str, max_new_tokens: int) -> str:
        inputs = self._inputs(tokens.grid.shape[0], prompt)
        return self._generate(inputs, max_new_tokens, mm_encoder_outputs={"video": self._merged(tokens)})


class InternVLAdapter(VisionLanguageAdapter):
    """An ``InternVLForConditionalGeneration`` plus a tokenizer that knows ``<img>`` / ``</img>``."""

    teacher_name = "internvl"

    def __init__(self, model, tokenizer):
        config = model.config
        if config.vision_feature_select_strategy != "default" or config.vision_feature_layer != -1:
            raise ValueError("InternVL adapter expects the last vision layer without CLS (the shipped configs' "
                             f"default); got layer {config.vision_feature_layer}, "
                             f"strategy {config.vision_feature_select_strategy!r}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.image_size = config.vision_config.image_size[0]

    def _pixels(self, frames: Tensor) -> Tensor:
        return _resized(frames, self.image_size, IMAGENET_MEAN, IMAGENET_STD).to(self.model.dtype)

    @cpu_threads
    @torch.no_grad()
    def extract_tokens(self, frames: Tensor) -> VisionTokens:
        hidden = self.model.model.vision_tower(pixel_values=self._pixels(frames)).last_hidden_state[:, 1:]
        side = int(round(hidden.shape[1] ** 0.5))
        return VisionTokens(hidden.reshape(frames.shape[0], side, side, -1).float())

    def _projected(self, tokens: VisionTokens) -> BaseModelOutputWithPooling:
        """The model's own pixel shuffle and projector on a token map, as ``get_image_features`` does."""
        inner = self.model.model
        x = inner.pixel_shuffle(tokens.grid.to(self.model.dtype), scale_factor=self.model.config.downsample_ratio)
        return BaseModelOutputWithPooling(pooler_output=inner.multi_modal_projector(x.reshape(x.shape[0], -1,
                                                                                             x.shape[-1])))

    def _inputs(self, frames: int, prompt: str) -> dict:
        """InternVL's video prompt: one ``Frame<i>: <img>…</img>`` line per frame, then the question."""
        config, tok = self.model.config, self.tokenizer
        side = self.image_size // config.vision_config.patch_size[0]
        n_image = int(side * config.downsample_ratio) ** 2
        ids = tok("<|im_start|>user\n", add_special_tokens=False)["input_ids"]
        for i in range(frames):
            ids += tok(f"Frame{i + 1}: <img>", add_special_tokens=False)["input_ids"]
            ids += [config.image_token_id] * n_image + tok("</img>\n", add_special_tokens=False)["input_ids"]
        ids += tok(f"{prompt}<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        ids = torch.tensor([ids])
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}

    @cpu_threads
    @torch.no_grad()
    def logits_from_frames(self, frames: Tensor, prompt: str) -> Tensor:
        return self.model(**self._inputs(frames.shape[0], prompt), pixel_values=self._pixels(frames)).logits[0].float()

    @cpu_threads
    @torch.no_grad()
    def logits_from_tokens(self, tokens: VisionTokens, prompt: str) -> Tensor:
        inputs = self._inputs(tokens.grid.shape[0], prompt)
        return self.model(**inputs, mm_encoder_outputs={"image": self._projected(tokens)}).logits[0].float()

    def _generate(self, inputs: dict, max_new_tokens: int, **vision) -> str:
        out = self.model.generate(**inputs, **vision, max_new_tokens=max_new_tokens, do_sample=False,
                                  pad_token_id=self.tokenizer.pad_token_id)
        return self.tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    @cpu_threads
    @torch.no_grad()
    def answer_from_frames(self, frames: Tensor, prompt: str, max_new_tokens: int) -> str:
        return self._generate(self._inputs(frames.shape[0], prompt), max_new_tokens, pixel_values=self._pixels(frames))

    @cpu_threads
    @torch.no_grad()
    def answer_from_tokens(self, tokens: VisionTokens, prompt: str, max_new_tokens: int) -> str:
        return self._generate(self._inputs(tokens.grid.shape[0], prompt), max_new_tokens,
                              mm_encoder_outputs={"image": self._projected(tokens)})


def load_internvl(path: str, dtype: torch.dtype = torch.bfloat16) -> InternVLAdapter:
    """An InternVL checkpoint in transformers' format (e.g. the ``-hf`` repos) from a directory or hub id."""
    from transformers import AutoTokenizer, InternVLForConditionalGeneration

    model = InternVLForConditionalGeneration.from_pretrained(path, dtype=dtype)
    return InternVLAdapter(model, AutoTokenizer.from_pretrained(path))


def load_qwen2_5_vl(path: str, image_size: int = 224, dtype: torch.dtype = torch.bfloat16) -> QwenVLAdapter:
    """A real Qwen2.5-VL checkpoint from a local directory or hub id (the hub only if the user is online)."""
    from transformers import AutoTokenizer, Qwen2_5_VLForConditionalGeneration

    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path, dtype=dtype)
    return QwenVLAdapter(model, AutoTokenizer.from_pretrained(path), image_size=image_size)
