"""The one interface every VLM sits behind, so modalities and the evaluation never see model internals.

A VLM is split where the feature field plugs in: ``extract_tokens`` runs only the
vision encoder and returns per-frame token maps (what ``recon4d fit`` distils);
``*_from_tokens`` takes such maps (the encoder's own, or ones decoded from the
field) and runs everything after the encoder. ``*_from_frames`` is the ordinary
pixel path. The ``logits_*`` twins return next-token logits of the prompt, which
is how tests prove the two paths are the same computation.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass

import torch
from torch import Tensor


@dataclass
class VisionTokens:
    """Vision-encoder output in a frame-major layout the feature field can produce.

    grid: [T, h, w, C] token map per frame (per temporal slot of the encoder).
    cls: [C] clip-level CLS token for encoders that have one (InternVideo2), else None.
    """

    grid: Tensor
    cls: Tensor | None = None


@dataclass(frozen=True)
class Generation:
    """Decoding settings, recorded next to every answer. Decoding is always greedy, so reruns agree."""

    max_new_tokens_cot: int = 512
    max_new_tokens_do: int = 16

    def max_new_tokens(self, mode: str) -> int:
        return self.max_new_tokens_cot if mode == "cot" else self.max_new_tokens_do

    def as_dict(self) -> dict:
        return {"decoding": "greedy", **asdict(self)}


def cpu_threads(method):
    """Run an adapter method with ``self.threads`` torch CPU threads (if set), restoring the count after.

    Why: a tiny model's thousands of small ops run ~40x slower on a loaded 2-core
    machine when torch spreads each over all threads (measured: 4.5 s vs 0.1 s per
    forward); real models leave ``threads`` unset and keep torch's default.
    """

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        if self.threads is None:
            return method(self, *args, **kwargs)
        before = torch.get_num_threads()
        torch.set_num_threads(self.threads)
        try:
            return method(self, *args, **kwargs)
        finally:
            torch.set_num_threads(before)

    return wrapper


def describe_placement(param: Tensor) -> dict[str, str]:
    return {"device": str(param.device), "dtype": str(param.dtype).removeprefix("torch.")}


class VisionLanguageAdapter(ABC):
    """Frames are float tensors [T, H, W, 3] in [0, 1] at any size; adapters resize them."""

    #: file stem under priors/teachers/ and head name in the fitted scene (no dots: heads live in a ModuleDict).
    teacher_name: str
    #: frames per encoder call for teacher extraction (None: any count, frames are encoded independently).
    clip_frames: int | None = None
    #: torch CPU threads for this model's calls (see ``cpu_threads``); None keeps torch's default.
    threads: int | None = None
    #: the wrapped torch model; its weights' device is where every input is built.
    model: torch.nn.Module

    @abstractmethod
    def extract_tokens(self, frames: Tensor) -> VisionTokens:
        """Vision-encoder tokens of ``frames`` as one clip."""

    @abstractmethod
    def logits_from_frames(self, frames: Tensor, prompt: str) -> Tensor:
        """Logits [seq, vocab] of the prompt with the video given as pixels."""

    @abstractmethod
    def logits_from_tokens(self, tokens: VisionTokens, prompt: str) -> Tensor:
        """Logits [seq, vocab] of the prompt with the vision encoder's output replaced by ``tokens``."""

    @abstractmethod
    def answer_from_frames(self, frames: Tensor, prompt: str, max_new_tokens: int) -> str:
        """Decoded answer text for the prompt after the video given as pixels."""

    @abstractmethod
    def answer_from_tokens(self, tokens: VisionTokens, prompt: str, max_new_tokens: int) -> str:
        """Decoded answer text with the vision encoder's output replaced by ``tokens``."""

    def placement(self) -> dict[str, str]:
        """Device and dtype of the model's weights, recorded beside every answer (bf16 and float32 answer differently)."""
        return describe_placement(next(self.model.parameters()))

    def run_settings(self) -> dict:
        """How this adapter runs its model beyond ``Generation`` (e.g. checkpoint decoding overrides), for the record."""
        return {}
