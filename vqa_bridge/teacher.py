"""Teacher extraction: a VLM's vision-encoder tokens for every frame of a scene, for `recon4d fit` to distil.

Encoders with a fixed clip length (InternVideo2: 8 frames) see Feature4X's strided
clips (``strided_clips``): each spans the whole video, so every frame's tokens are
computed with the same long-range temporal context the VLM sees when it is shown 8
frames of the video, not that of its 7 neighbours. A frame takes the tokens of the
last clip that holds it; the CLS token, which the field does not render, is the
mean over the clips (key ``cls`` beside ``features``; the feature-field modality
prepends it, as Feature4X does; the fit reads only ``features``). Encoders that
treat frames independently (Qwen2.5-VL) see batches of frames.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from vqa_bridge.adapters.base import VisionLanguageAdapter

# Frames per encoder call for encoders without a clip length (bounds memory, not results).
BATCH_FRAMES = 16


@dataclass(frozen=True)
class Clip:
    """Frames the encoder sees together; ``stores``: those whose tokens are kept from it; ``cls``: its CLS counts."""

    frames: list[int]
    stores: list[int]
    cls: bool = True


def strided_clips(n: int, clip: int) -> list[list[int]]:
    """Feature4X's clips of ``clip`` frames over ``n`` (its ``get_indices_split``).

    With s = n // clip, clip j holds frames j, j+s, ..., j+(clip-1)s for j < s; when
    those miss the last frame, one more clip ends at it: n-1-(clip-1)s, ..., n-1 (with
    step s). A video shorter than a clip (where Feature4X has no clips) is one clip of
    all its frames, the last repeated.
    """
    if n < clip:
        return [list(range(n)) + [n - 1] * (clip - n)]
    s = n // clip
    clips = [[j + s * k for k in range(clip)] for j in range(s)]
    if clips[-1][-1] < n - 1:
        clips.append([n - 1 - s * k for k in reversed(range(clip))])
    return clips


def clip_plan(n: int, clip: int) -> list[Clip]:
    """The encoder calls of one extraction, in order: Feature4X's clips, then one per frame they miss.

    In Feature4X a frame takes the tokens of the last of its clips that holds it, and
    the CLS is the mean over its clips; both are kept. Its clips miss the frames between
    clip*s and n-2 when n is not a multiple of clip (frame 48 of 50), which Feature4X
    leaves at zero; each of those takes its tokens from the same kind of strided clip
    ending at it (frames t-(clip-1)s, ..., t), without a say in the CLS.
    """
    clips = strided_clips(n, clip)
    plan = [Clip(c, list(dict.fromkeys(c))) for c in clips]  # a short video's repeated frame keeps its first slot
    covered = set().union(*clips)
    s = max(n // clip, 1)
    plan += [Clip([t - s * k for k in reversed(range(clip))], [t], cls=False) for t in range(n) if t not in covered]
    return plan


def extract_teacher(adapter: VisionLanguageAdapter, frames: Tensor) -> tuple[Tensor, Tensor | None]:
    """(features [T,h,w,C] float32, CLS [C] or None) on the CPU, whatever the model's device, for frames [T,H,W,3]."""
    T = frames.shape[0]
    if not adapter.clip_frames:
        grids = [adapter.extract_tokens(frames[start:start + BATCH_FRAMES]).grid.float().cpu()
                 for start in range(0, T, BATCH_FRAMES)]
        return torch.cat(grids), None
    features, cls = None, []
    for clip in clip_plan(T, adapter.clip_frames):
        tokens = adapter.extract_tokens(frames[clip.frames])
        grid = tokens.grid.float().cpu()
        if features is None:
            features = torch.empty(T, *grid.shape[1:])
        features[clip.stores] = grid[[clip.frames.index(f) for f in clip.stores]]
        if clip.cls and tokens.cls is not None:
            cls.append(tokens.cls.float().cpu())
    return features, (torch.stack(cls).mean(0) if cls else None)
