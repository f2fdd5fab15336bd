"""The one interface every VLM sits behind, so modalities and the evaluation never see model internals.

A VLM is split where the feature field plugs in: ``extract_tokens`` runs only the
vision encoder and returns per-frame token maps (what ``recon4d fit`` distils);
``*_from_tokens`` takes such maps (the encoder's own, or ones decoded from the
field) and runs everything after the encoder. ``*_from_frames`` is the ordinary
pixel path. The ``logits_*`` twins return next-token logits of the prompt, which
is how tests prove the two paths are the same computation.

The four public methods are written here once; an adapter supplies how it builds
a model input from pixels (``frame_inputs``) and from tokens (``token_inputs``),
how it runs one (``_logits``, ``_generate``), and, where the tokens cannot travel
in the input, what puts them in place of the encoder meanwhile (``_tokens_in_place``).
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
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
    def frame_inputs(self, frames: Tensor, prompt: str):
        """The model's input for the prompt with the video given as pixels (what ``_logits``/``_generate`` take)."""

    @abstractmethod
    def token_inputs(self, tokens: VisionTokens, prompt: str):
        """The model's input for the prompt with the vision encoder's output replaced by ``tokens``."""

    @abstractmethod
    def _logits(self, inputs) -> Tensor:
        """Logits [seq, vocab] of a model input."""

    @abstractmethod
    def _generate(self, inputs, max_new_tokens: int) -> str:
        """Greedily decoded answer text after a model input."""

    def _tokens_in_place(self, tokens: VisionTokens) -> AbstractContextManager:
        """While open, ``tokens`` stand in for the encoder's output; nothing to do where ``token_inputs`` carries them."""
        return nullcontext()

    @cpu_threads
    @torch.no_grad()
    def logits_from_frames(self, frames: Tensor, prompt: str) -> Tensor:
        """Logits [seq, vocab] of the prompt with the video given as pixels."""
        return self._logits(self.frame_inputs(frames, prompt))

    @cpu_threads
    @torch.no_grad()
    def logits_from_tokens(self, tokens: VisionTokens, prompt: str) -> Tensor:
        """Logits [seq, vocab] of the prompt with the vision encoder's output replaced by ``tokens``."""
        inputs = self.token_inputs(tokens, prompt)
        with self._tokens_in_place(tokens):
            return self._logits(inputs)

    @cpu_threads
    @torch.no_grad()
    def answer_from_frames(self, frames: Tensor, prompt: str, max_new_tokens: int) -> str:
        """Decoded answer text for the prompt after the video given as pixels."""
        return self._generate(self.frame_inputs(frames, prompt), max_new_tokens)

    @cpu_threads
    @torch.no_grad()
    def answer_from_tokens(self, tokens: VisionTokens, prompt: str, max_new_tokens: int) -> str:
        """Decoded answer text with the vision encoder's output replaced by ``tokens``."""
        inputs = self.token_inputs(tokens, prompt)
        with self._tokens_in_place(tokens):
            return self._generate(inputs, max_new_tokens)

    def placement(self) -> dict[str, str]:
        """Device and dtype of the model's weights, recorded beside every answer (bf16 and float32 answer differently)."""
        return describe_placement(next(self.model.parameters()))

    def run_settings(self) -> dict:
        """How this adapter runs its model beyond ``Generation`` (e.g. checkpoint decoding overrides), for the record."""
        return {}
