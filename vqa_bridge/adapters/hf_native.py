"""What the transformers-native adapters (Qwen2.5-VL in ``qwen.py``, InternVL in ``internvl.py``) share.

Both build every input through the checkpoint's own processor: the chat template
lays out the conversation (system prompt included, where the template has one),
the video processor picks the pixel budget, normalisation and frame grouping,
and the processor expands the video placeholder into the model's vision tokens.
The bridge only hands frames over as 8-bit video frames, the form a decoded
video file gives the processor.

Decoding is greedy whatever the checkpoint's ``generation_config.json`` says
(the shipped Qwen2.5-VL one samples with temperature, top-p, top-k and a
repetition penalty): reruns must agree and the pixel and feature-field paths
must be comparable answer for answer. What was overridden is kept in
``run_settings`` so results record it.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch import Tensor

from vqa_bridge.adapters.base import VisionLanguageAdapter

# Sampling and search settings a checkpoint may ship; unset, so that generate() takes the argmax at every step.
GREEDY = {"do_sample": False, "num_beams": 1, "temperature": None, "top_p": None, "top_k": None,
          "repetition_penalty": None}


def placement(device: str | torch.device | None = None, dtype: torch.dtype | None = None
              ) -> tuple[torch.device, torch.dtype]:
    """The device (CUDA when there is one) and dtype (bf16 on CUDA, float32 elsewhere) a model loads with."""
    device = torch.device(device if device is not None else "cuda" if torch.cuda.is_available() else "cpu")
    if dtype is None:
        dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    return device, dtype


def video_frames(frames: Tensor) -> np.ndarray:
    """[T,H,W,3] floats in [0,1] -> uint8 [T,H,W,3]: what the processor gets from a decoded video."""
    return (frames.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).cpu().numpy()


def make_greedy(model, pad_token_id: int | None) -> dict:
    """Replace the model's generation config by a greedy copy; returns {setting: checkpoint value} for what changed.

    The model's own config is replaced, not just a copy passed to ``generate``: transformers fills every unset
    field of a passed config from ``model.generation_config``, which would bring the checkpoint's sampling
    settings and repetition penalty back.
    """
    config = copy.deepcopy(model.generation_config)
    overridden = {k: getattr(config, k) for k, v in GREEDY.items()
                  if getattr(config, k, None) is not None and getattr(config, k) != v}
    config.update(**GREEDY)
    if config.pad_token_id is None:
        config.pad_token_id = pad_token_id
    model.generation_config = config
    return overridden


def on_device(inputs: dict, device: torch.device) -> dict:
    """Every tensor of a processor output moved to the model's device (other values unchanged)."""
    return {k: v.to(device) if isinstance(v, Tensor) else v for k, v in inputs.items()}


class ProcessorAdapter(VisionLanguageAdapter):
    """A transformers ``*ForConditionalGeneration`` with its processor; subclasses split it at the encoder."""

    def __init__(self, model, processor, teacher_name: str | None = None):
        self.model = model.eval()
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.overridden = make_greedy(model, self.tokenizer.pad_token_id)
        if teacher_name is not None:
            self.teacher_name = teacher_name

    @property
    def device(self) -> torch.device:
        return self.model.device

    def chat_text(self, prompt: str) -> str:
        """The checkpoint's chat template on one user turn: the video, then the prompt."""
        messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": prompt}]}]
        return self.processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    def text_inputs(self, prompt: str, video_replacement: str) -> dict:
        """Input ids of the prompt with the video placeholder expanded as the processor expands it, no pixels.

        The processor's own text steps (its call refuses video tokens without a video): the placeholder
        replaced by ``video_replacement``, the tokenizer, and the modality types where the processor adds them.
        """
        (text,), _ = self.processor.get_text_with_replacements([self.chat_text(prompt)], [], [video_replacement])
        inputs = dict(self.tokenizer([text], return_tensors="pt"))
        if getattr(self.processor, "return_mm_token_type_ids", False):
            inputs["mm_token_type_ids"] = torch.tensor(self.processor.create_mm_token_type_ids(inputs["input_ids"]))
        return on_device(inputs, self.device)

    def _logits(self, inputs: dict) -> Tensor:
        return self.model(**inputs).logits[0].float().cpu()

    def _generate(self, inputs: dict, max_new_tokens: int) -> str:
        out = self.model.generate(**inputs, max_new_tokens=max_new_tokens)
        return self.tokenizer.decode(out[0, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    def run_settings(self) -> dict:
        return {"generate": {k: v for k, v in GREEDY.items() if v is not None},
                "checkpoint_generation_overridden": self.overridden}
