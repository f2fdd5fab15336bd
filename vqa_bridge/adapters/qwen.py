"""Qwen2.5-VL through transformers' own classes and the checkpoint's processor (no remote code).

The video processor decides the input: it resizes every frame to its pixel budget
(multiples of patch x merge = 28 px, at least 128 merged tokens a frame), pads
the clip to an even length by repeating the last frame, and puts two consecutive
frames into each temporal slot of the Conv3d stem (``temporal_patch_size`` 2);
``second_per_grid_ts`` (2 / fps) spaces the slots in the 3-D rope. The tower
attends within a slot, so a slot's tokens depend on its two frames only.

Teacher tokens are the tower's hidden states *before* the patch merger, put back
from its window-attention order into a frame-major map. A slot's map is given to
each of its frames, so ``extract_tokens`` returns one map per frame ([T, h, w, C],
as ``recon4d fit`` distils and the feature field renders). The way back groups
frames into slots as the processor does and averages each slot's maps (the mean
of a slot's identical copies is the slot's map itself, bit for bit), runs the
model's merger on them and hands the result to the language model through
``mm_encoder_outputs``, transformers' hook for pre-encoded vision features; the
ids, grid and slot timing are the processor's, so both paths are one computation.
Teacher extraction must therefore cut a scene into clips of an even length, so
that its slots pair the frames this tower pairs (``vqa_bridge.teacher`` uses 16).
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import Tensor
from transformers.modeling_outputs import BaseModelOutputWithPooling
from transformers.vision_utils import get_vision_window_index

from vqa_bridge.adapters.base import VisionTokens, cpu_threads
from vqa_bridge.adapters.hf_native import ProcessorAdapter, on_device, placement, video_frames

# Frames per second the bridge's clips are declared at: qwen-vl-utils' default sampling rate for this model.
DEFAULT_FPS = 2.0


class QwenVLAdapter(ProcessorAdapter):
    """A ``Qwen2_5_VLForConditionalGeneration`` with its ``Qwen2_5_VLProcessor``; frames are shown at ``fps``."""

    teacher_name = "qwen2_5_vl"

    def __init__(self, model, processor, fps: float = DEFAULT_FPS, teacher_name: str | None = None):
        super().__init__(model, processor, teacher_name)
        self.vision = model.config.vision_config
        video = processor.video_processor
        ours = (video.patch_size, video.merge_size, video.temporal_patch_size)
        theirs = (self.vision.patch_size, self.vision.spatial_merge_size, self.vision.temporal_patch_size)
        if ours != theirs:
            raise ValueError(f"processor patch/merge/temporal sizes {ours} do not match the model's {theirs}")
        self.slot = video.temporal_patch_size
        self.fps = fps

    # -- pixels -> vision tower -------------------------------------------------------------
    def _video_kwargs(self, frames: int) -> dict:
        """The frames are already the sampled ones: no resampling, their rate declared for the slot timing."""
        return {"video_metadata": [{"total_num_frames": frames, "fps": self.fps, "frames_indices": list(range(frames))}],
                "do_sample_frames": False}

    def _window_order(self, grid: Tensor) -> Tensor:
        """Row i of the tower's hidden states holds original patch row ``order[i]``."""
        window_index, _ = get_vision_window_index(grid, self.vision.spatial_merge_size, self.vision.window_size,
                                                  self.vision.patch_size)
        unit = self.vision.spatial_merge_size ** 2
        return (window_index[:, None] * unit + torch.arange(unit, device=window_index.device)).reshape(-1)

    @cpu_threads
    @torch.no_grad()
    def extract_tokens(self, frames: Tensor) -> VisionTokens:
        video = self.processor.video_processor(videos=[video_frames(frames)], return_tensors="pt",
                                               **self._video_kwargs(frames.shape[0]))
        video = on_device(dict(video), self.device)
        grid, visual = video["video_grid_thw"], self.model.model.visual
        hidden = visual(video["pixel_values_videos"].to(visual.dtype), grid_thw=grid).last_hidden_state
        rows = torch.empty_like(hidden)
        rows[self._window_order(grid)] = hidden
        m = self.vision.spatial_merge_size
        _, h, w = grid[0].tolist()
        slots = rearrange(rows, "(t hb wb mh mw) c -> t (hb mh) (wb mw) c", hb=h // m, wb=w // m, mh=m, mw=m)
        return VisionTokens(slots.repeat_interleave(self.slot, dim=0)[: frames.shape[0]].float().cpu())

    def _slots(self, tokens: VisionTokens) -> Tensor:
        """Per-frame maps [T,h,w,C] -> per-slot maps, frames grouped (and the clip padded) as the processor does."""
        grid = tokens.grid
        if pad := -grid.shape[0] % self.slot:
            grid = torch.cat([grid, grid[-1:].expand(pad, -1, -1, -1)])
        return grid.unflatten(0, (-1, self.slot)).mean(dim=1)

    def _merged(self, slots: Tensor) -> BaseModelOutputWithPooling:
        """Run the patch merger on frame-major slot maps, as the tower does on its own output."""
        m, visual = self.vision.spatial_merge_size, self.model.model.visual
        rows = rearrange(slots, "t (hb mh) (wb mw) c -> (t hb wb mh mw) c", mh=m, mw=m)
        return BaseModelOutputWithPooling(pooler_output=(visual.merger(rows.to(self.device, visual.dtype)),))

    # -- prompt -----------------------------------------------------------------------------
    def frame_inputs(self, frames: Tensor, prompt: str) -> dict:
        """The processor's output for the chat-templated prompt and the frames as a video, on the model's device."""
        inputs = self.processor(text=[self.chat_text(prompt)], videos=[video_frames(frames)], return_tensors="pt",
                                **self._video_kwargs(frames.shape[0]))
        return on_device(dict(inputs), self.device)

    def token_inputs(self, tokens: VisionTokens, prompt: str) -> dict:
        """What ``frame_inputs`` gives for a clip of this token map, without pixels (plus the merged slot tokens)."""
        slots = self._slots(tokens)
        grid = torch.tensor([list(slots.shape[:3])])
        inputs = self.text_inputs(prompt, self.processor.replace_video_token({"video_grid_thw": grid}, 0))
        inputs["video_grid_thw"] = grid.to(self.device)
        inputs["second_per_grid_ts"] = torch.tensor([self.slot / self.fps], device=self.device)
        inputs["mm_encoder_outputs"] = {"video": self._merged(slots)}
        return inputs

    # -- language side ----------------------------------------------------------------------
    def _logits(self, inputs: dict) -> Tensor:
        self.model.model.rope_deltas = None  # the model caches 3-D rope offsets between calls
        return super()._logits(inputs)

    def _generate(self, inputs: dict, max_new_tokens: int) -> str:
        self.model.model.rope_deltas = None
        return super()._generate(inputs, max_new_tokens)

    def run_settings(self) -> dict:
        return {**super().run_settings(), "video_fps": self.fps}


def load_qwen2_5_vl(path: str, device: str | torch.device | None = None, dtype: torch.dtype | None = None,
                    fps: float = DEFAULT_FPS) -> QwenVLAdapter:
    """A Qwen2.5-VL checkpoint (directory or hub id) and its processor on ``device`` (see ``placement``)."""
    from transformers import AutoProcessor, Qwen2_5_VLForConditionalGeneration

    device, dtype = placement(device, dtype)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(path, dtype=dtype).to(device)
    return QwenVLAdapter(model, AutoProcessor.from_pretrained(path), fps=fps)
