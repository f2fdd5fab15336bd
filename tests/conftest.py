"""Shared test fixtures: the real-data location, GPU/compiler skips, fitted scenes and a poisoned loss."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"

requires_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
requires_compiler = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a C++ compiler")


def shared_data(*parts: str) -> Path:
    """Path under ../shared/data, or skip the test when the real data is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"real data not available at {path}")
    return path


def poison_loss(trainer, monkeypatch, call: int) -> None:
    """Make the trainer's ``call``-th loss NaN (the others unchanged): what the rollback must survive."""
    real_losses, calls = trainer.losses, {"n": 0}

    def poisoned(t):
        calls["n"] += 1
        loss, terms, render = real_losses(t)
        return (loss * float("nan"), terms, render) if calls["n"] == call else (loss, terms, render)

    monkeypatch.setattr(trainer, "losses", poisoned)


@pytest.fixture(scope="session")
def fitted_left_scene(tmp_path_factory) -> tuple[Path, Path]:
    """(synth folder, fitted scene folder) of a tiny scene with one object moving left."""
    from tests.fitted import fitted_scene, synth_scene

    root = tmp_path_factory.mktemp("fitted_left")
    synth = synth_scene(root / "synth", "--motion", "left", "--seed", "1")
    return synth, fitted_scene(synth, root / "fit")


@pytest.fixture(scope="session")
def fitted_right_scene(tmp_path_factory):
    """The mirror of ``fitted_left_scene``: same seed and layout draws, the object moves right."""
    from tests.fitted import fitted_scene, synth_scene

    root = tmp_path_factory.mktemp("fitted_right")
    synth = synth_scene(root / "synth", "--motion", "right", "--seed", "1")
    return synth, fitted_scene(synth, root / "fit")
