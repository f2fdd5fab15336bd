"""The inputs the VLM is compared on, built from a fitted scene folder, and the geometry-only baseline.

``raw``: the scene's own frames (the 2D video). ``global-video``: the fitted scene
rendered from DESIGN.md's global camera position, RGB, framed so that the content
fills the frame (``recon4d.render.cameras``). ``feature-field``: the same camera,
but the rendered latent is pooled to the teacher's token grid and decoded by the
scene's head for that teacher, so it replaces the VLM's vision encoder output.
``raw+cues``: the raw frames, with the fitted scene's trajectory description
(``recon4d.grounding``) put in the prompt. All of these use the frames VLM4D
samples: ``np.linspace(0, N-1, n)`` rounded. ``geometric`` is no VLM input: the
geometric answerer's reply from the same trajectories, scored in the same table
so that the VLM columns stand beside what the geometry alone answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal, get_args

import cv2
import numpy as np
import torch
from torch import Tensor

from recon4d.errors import UserError
from recon4d.scene.teachers import read_teacher_cls
from recon4d.scene_folder import SceneFolder
from vqa_bridge.adapters.base import VisionTokens

Modality = Literal["raw", "global-video", "feature-field", "raw+cues", "geometric"]
"""The one list of modalities, in the order tables show them; the commands' ``--modalities`` choices."""
MODALITIES: tuple[str, ...] = get_args(Modality)
VLM_MODALITIES = MODALITIES[:4]  # the ones a VLM answers; ``geometric`` is answered from the trajectories


class ShortVideoError(UserError, ValueError):
    """The video has fewer frames than the evaluation samples."""


def sample_indices(total: int, n_frames: int) -> list[int]:
    """VLM4D's frame sampling; a video shorter than ``n_frames`` is an error, not a repeat."""
    if total < n_frames:
        raise ShortVideoError(f"video has {total} frames, fewer than the {n_frames} asked for")
    return np.linspace(0, total - 1, n_frames).round().astype(int).tolist()


def read_frames(scene: Path) -> Tensor:
    """``<scene>/frames/*.jpg|png`` as [N,H,W,3] float in [0,1]."""
    frames = SceneFolder(scene).frames
    files = sorted(frames.glob("*.jpg")) or sorted(frames.glob("*.png"))
    if not files:
        raise FileNotFoundError(f"no frames in {frames}")
    images = np.stack([cv2.cvtColor(cv2.imread(str(f)), cv2.COLOR_BGR2RGB) for f in files])
    return torch.from_numpy(images).float() / 255.0


class SceneInputs:
    """Builds the inputs of one scene folder, loading frames and the fitted model once.

    Built inputs are kept per (modality, frames): every question on a video samples
    the same frames, so a scene is rendered once per modality, not once per question.
    """

    def __init__(self, folder: Path, teacher: str, device: str = "auto"):
        self.folder = Path(folder)
        self.teacher = teacher
        self.device = device  # where the fitted scene renders (``load_fitted``)
        self._frames: Tensor | None = None
        self._fitted = None
        self._tracks = None
        self._cues: str | None = None
        self._built: dict[tuple[str, tuple[int, ...]], Tensor | VisionTokens] = {}
        self._global = None

    def frame_count(self) -> int:
        return self.frames().shape[0]

    def frames(self) -> Tensor:
        if self._frames is None:
            self._frames = read_frames(self.folder)
        return self._frames

    def fitted(self):
        if self._fitted is None:
            from recon4d.render.fitted import load_fitted

            self._fitted = load_fitted(self.folder, self.device)
        return self._fitted

    def tracks(self):
        """The fitted scene's object trajectories (``recon4d.grounding``), loaded once."""
        if self._tracks is None:
            from recon4d.grounding.trajectories import load_tracks

            self._tracks = load_tracks(self.folder)
        return self._tracks

    def cues(self) -> str:
        """The trajectory description ``raw+cues`` puts in the prompt (made once per scene)."""
        if self._cues is None:
            from recon4d.grounding.describe import describe

            self._cues = describe(self.tracks())
        return self._cues

    def geometric(self, question: str, choices: dict[str, str]):
        """The geometric answerer's ``Answer`` (``letter`` None for "cannot tell")."""
        from recon4d.grounding.answerer import answer_question

        return answer_question({"question": question, "choices": choices}, self.tracks())

    def build(self, modality: str, times: list[int]) -> Tensor | VisionTokens:
        """Frames [n,H,W,3] for the video modalities, VisionTokens for the feature field."""
        key = (modality, tuple(times))
        if key not in self._built:
            self._built[key] = self._build(modality, times)
        return self._built[key]

    def _build(self, modality: str, times: list[int]) -> Tensor | VisionTokens:
        if modality in ("raw", "raw+cues"):
            return self.frames()[times]
        if modality not in VLM_MODALITIES:
            raise ValueError(f"no VLM input for modality {modality!r}; choose from {', '.join(VLM_MODALITIES)}")
        from recon4d.render.video import render_frame

        fitted = self.fitted()
        cams = self.global_cameras(times)
        if modality == "global-video":
            with torch.no_grad():
                return torch.stack([render_frame(fitted, cams, i, ())["rgb"] for i in range(len(times))])
        if self.teacher not in fitted.heads:
            have = ", ".join(fitted.heads) or "none"
            raise ValueError(f"the fit has no decoder head for teacher {self.teacher!r} (has: {have}); run "
                             f"`recon4d vqa extract --scene {self.folder}` and re-fit")
        with torch.no_grad():
            grid = torch.stack([render_frame(fitted, cams, i, (self.teacher,))[f"decoded.{self.teacher}"]
                                for i in range(len(times))])
        return VisionTokens(grid, self._cls())

    def global_cameras(self, times: list[int]):
        """The global camera (``recon4d render --path global``'s, framed to fill) at ``times``; placed once."""
        from recon4d.render.cameras import CameraPath, camera_path

        fitted = self.fitted()
        if self._global is None:
            self._global = camera_path("global", fitted.scene, fitted.data, [0])
        n = len(times)
        return CameraPath(self._global.viewmats.expand(n, 4, 4).clone(), self._global.Ks.expand(n, 3, 3).clone(),
                          list(times), self._global.width, self._global.height)

    def _cls(self) -> Tensor | None:
        """The input video's CLS token saved at extraction (the field renders no CLS of its own)."""
        return read_teacher_cls(self.folder, self.teacher)
