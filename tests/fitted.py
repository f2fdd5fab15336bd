"""Build small fitted scenes for tests: a tiny `recon4d synth` scene fitted with exact priors.

Shared by the fit, render/export and answerer tests; each call costs ~30-60 s on 2 cores,
so tests build them once per session through the fixtures in conftest.py.
"""

from __future__ import annotations

from pathlib import Path

from recon4d.commands import fit as fit_command
from recon4d.commands import synth as synth_command


def synth_scene(out: Path, *extra: str) -> Path:
    """Generate a tiny synth scene (extra CLI args, e.g. "--motion", "left") and return its folder."""
    before = set(out.glob("*")) if out.exists() else set()
    assert synth_command.main(["--preset", "tiny", "--out", str(out), *extra]) == 0
    new = sorted(set(out.glob("*")) - before)
    assert new, "synth wrote no scene"
    return new[0]


def fitted_scene(synth_dir: Path, out: Path, *extra: str) -> Path:
    """Fit a synth scene with exact priors and the built-in patch teacher; returns the scene folder."""
    args = ["--video", str(synth_dir), "--out", str(out), "--priors", "gt", "--teacher", "patch",
            "--preset", "test", *extra]
    assert fit_command.main(args) == 0
    return out / synth_dir.name
