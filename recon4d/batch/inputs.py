"""Turn what the user points ``recon4d batch`` at into a list of scenes to fit.

Why a separate step: the batch must know every scene name before anything runs,
so that two inputs that would write the same scene folder are refused up front
(one task per scene folder) and a restarted batch sees the same list again.

Accepted inputs:

- a folder of videos (``*.mp4``, ``*.mov``, ...): one scene per video, named by its stem;
- a folder of sequence folders (DAVIS ``<seq>/JPEGImages``, frame folders, ``recon4d synth``
  scenes): one scene per sub-folder;
- a DAVIS root (``JPEGImages/480p/<seq>/``): one scene per sequence;
- a ``.txt`` list (one path per line, optional ``,name``; ``#`` comments) or a ``.csv``
  with a ``video`` (or ``path``) column and an optional ``name`` column. Relative paths
  are relative to the list file.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from recon4d.errors import UserError
from recon4d.io.frames import IMAGE_SUFFIXES, VIDEO_SUFFIXES  # what the frames stage reads


class InputError(UserError, ValueError):
    """The batch input cannot be turned into a scene list; the message says why."""


@dataclass(frozen=True)
class SceneSpec:
    """One scene of a batch: its folder name under ``--out`` and the input ``recon4d fit`` reads."""

    name: str
    source: Path


def _has_frames(folder: Path) -> bool:
    return any(p.suffix.lower() in IMAGE_SUFFIXES for p in folder.iterdir() if p.is_file())


def _is_sequence(folder: Path) -> bool:
    """A folder ``recon4d fit`` reads as one video: frames, a DAVIS sequence, or a synth scene."""
    return (folder / "JPEGImages").is_dir() or (folder / "synth.json").exists() or _has_frames(folder)


def _spec(path: Path, name: str | None = None) -> SceneSpec:
    if not path.exists():
        raise InputError(f"input {path} does not exist")
    path = path.resolve()  # workers on other nodes (or another cwd) must find it
    return SceneSpec(name or (path.stem if path.is_file() else path.name), path)


def _from_folder(folder: Path) -> list[SceneSpec]:
    davis = folder / "JPEGImages" / "480p"
    if davis.is_dir():  # DAVIS root: sequences live under JPEGImages/480p/
        return [_spec(p) for p in sorted(davis.iterdir()) if p.is_dir()]
    if _is_sequence(folder):
        return [_spec(folder)]
    videos = [_spec(p) for p in sorted(folder.iterdir()) if p.is_file() and p.suffix.lower() in VIDEO_SUFFIXES]
    sequences = [_spec(p) for p in sorted(folder.iterdir()) if p.is_dir() and _is_sequence(p)]
    return videos + sequences


def _from_list(path: Path) -> list[SceneSpec]:
    base = path.parent
    if path.suffix.lower() == ".csv":
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        if rows and not ({"video", "path"} & set(rows[0])):
            raise InputError(f"{path}: a CSV list needs a 'video' or 'path' column (has {sorted(rows[0])})")
        pairs = [(row.get("video") or row.get("path") or "", row.get("name") or None) for row in rows]
    else:
        pairs = []
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                src, _, name = line.partition(",")
                pairs.append((src.strip(), name.strip() or None))
    return [_spec(base / src if not Path(src).is_absolute() else Path(src), name) for src, name in pairs if src]


def discover(inputs: Path) -> list[SceneSpec]:
    """Scene specs for a folder or list file; refuses duplicates and empty inputs."""
    inputs = Path(inputs)
    if not inputs.exists():
        raise InputError(f"batch input {inputs} does not exist")
    specs = _from_folder(inputs) if inputs.is_dir() else _from_list(inputs)
    if not specs:
        raise InputError(f"no videos or sequences found in {inputs}")
    seen: dict[str, Path] = {}
    for spec in specs:
        if spec.name in seen:
            raise InputError(f"two inputs map to scene {spec.name!r} ({seen[spec.name]} and {spec.source}); "
                             f"name them apart in a list file (`path,name`)")
        seen[spec.name] = spec.source
    return specs
