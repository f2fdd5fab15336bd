"""InternVL (transformers' format, e.g. ``OpenGVLab/InternVL3-8B-hf``) through the checkpoint's processor.

The processor shows a video as one 448 px image per frame (the video processor's
size and normalisation, no tiling) and writes it into the prompt as
``Frame<i>: <img><IMG_CONTEXT> x 256</img>`` lines where the chat template put
``<video>``. Frames are encoded independently. Teacher tokens are the vision
tower's last hidden state without the CLS row (the model's "default" feature
selection drops it too); the feature-field path runs the model's own
``pixel_shuffle`` and ``multi_modal_projector`` on them and enters through
``mm_encoder_outputs``, where ``get_image_features``' output would.
"""

from __future__ import annotations

import torch
from torch import Tensor
from transformers.modeling_outputs import BaseModelOutputWithPooling

from vqa_bridge.adapters.base import VisionTokens, cpu_threads
from vqa_bridge.adapters.hf_native import ProcessorAdapter, on_device, placement, video_frames


class InternVLAdapter(ProcessorAdapter):
    """An ``InternVLForConditionalGeneration`` with its ``InternVLProcessor``."""

    teacher_name = "internvl"

    def __init__(self, model, processor, teacher_name: str | None = None):
        config = model.config
        if config.vision_feature_select_strategy != "default" or config.vision_feature_layer != -1:
            raise ValueError("InternVL adapter expects the last vision layer without CLS (the shipped configs' "
                             f"default); got layer {config.vision_feature_layer}, "
                             f"strategy {config.vision_feature_select_strategy!r}")
        super().__init__(model, processor, teacher_name)

    def _pixels(self, frames: Tensor) -> Tensor:
        """[T,3,S,S] as the processor's video processor prepares the frames, on the model's device and dtype."""
        video = self.processor.video_processor(videos=[video_frames(frames)], do_sample_frames=False,
                                               return_tensors="pt")["pixel_values_videos"]
        return video.flatten(0, 1).to(self.device, self.model.dtype)

    @cpu_threads
    @torch.no_grad()
    def extract_tokens(self, frames: Tensor) -> VisionTokens:
        hidden = self.model.model.vision_tower(pixel_values=self._pixels(frames)).last_hidden_state[:, 1:]
        side = round(hidden.shape[1] ** 0.5)
        return VisionTokens(hidden.reshape(frames.shape[0], side, side, -1).float().cpu())

    def _projected(self, tokens: VisionTokens) -> BaseModelOutputWithPooling:
        """The model's own pixel shuffle and projector on a token map, as ``get_image_features`` does."""
        inner = self.model.model
        grid = tokens.grid.to(self.device, self.model.dtype)
        x = inner.pixel_shuffle(grid, scale_factor=self.model.config.downsample_ratio)
        return BaseModelOutputWithPooling(pooler_output=inner.multi_modal_projector(x.flatten(1, 2)))

    def frame_inputs(self, frames: Tensor, prompt: str) -> dict:
        """The processor's output for the chat-templated prompt and the frames as a video, on the model's device."""
        inputs = self.processor(text=[self.chat_text(prompt)], videos=[video_frames(frames)], do_sample_frames=False,
                                return_tensors="pt")
        inputs = on_device(dict(inputs), self.device)
        inputs["pixel_values"] = inputs["pixel_values"].to(self.model.dtype)
        return inputs

    def token_inputs(self, tokens: VisionTokens, prompt: str) -> dict:
        """What ``frame_inputs`` gives for a clip of this token map, pixels replaced by the projected tokens."""
        replacement = self.processor.replace_video_token({"pixel_values_videos": [tokens.grid]}, 0)
        return {**self.text_inputs(prompt, replacement), "mm_encoder_outputs": {"image": self._projected(tokens)}}


def load_internvl(path: str, device: str | torch.device | None = None,
                  dtype: torch.dtype | None = None) -> InternVLAdapter:
    """An InternVL checkpoint in transformers' format (directory or hub id) and its processor on ``device``."""
    from transformers import AutoProcessor, InternVLForConditionalGeneration

    device, dtype = placement(device, dtype)
    model = InternVLForConditionalGeneration.from_pretrained(path, dtype=dtype).to(device)
    return InternVLAdapter(model, AutoProcessor.from_pretrained(path))
