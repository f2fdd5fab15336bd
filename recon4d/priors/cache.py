"""Which prior files are up to date: a hash of (input frames + settings + upstream keys) per step.

Why: priors are the slow part of preprocessing and every later stage re-runs
from the scene folder; a re-run with the same frames and settings must reuse
them, and any change (other frames, other flag) must recompute exactly the
steps it affects. Keys live in ``priors/cache.json``, written atomically after
each step's file, so a killed run at worst recomputes that one step. Each key
also covers the source of the code that computes its step
(:func:`source_digest`): a scene folder made by an older recon4d recomputes the
steps whose code changed since, and only those.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from types import ModuleType

from recon4d.io.atomic import write_json


def frames_digest(scene: Path) -> str:
    """SHA-256 of ``frames.json`` and every frame/mask file's bytes."""
    h = hashlib.sha256((scene / "frames.json").read_bytes())
    for f in sorted((scene / "frames").rglob("*")):
        if f.is_file():
            h.update(f.relative_to(scene).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def source_digest(*code) -> str:
    """SHA-256 of the source files of the modules defining ``code`` (classes or functions) and of every
    recon4d module they import, followed transitively, so a step's key needs to name only its entry points."""
    h = hashlib.sha256()
    for file in sorted(_recon4d_sources([sys.modules[c.__module__] for c in code])):
        h.update(Path(file).read_bytes())
    return h.hexdigest()


def _recon4d_sources(todo: list[ModuleType]) -> set[str]:
    seen: dict[str, str] = {}
    while todo:
        module = todo.pop()
        if module.__name__ in seen:
            continue
        seen[module.__name__] = module.__file__
        for value in vars(module).values():
            name = value.__name__ if isinstance(value, ModuleType) else getattr(value, "__module__", None)
            if isinstance(name, str) and name.startswith("recon4d.") and name in sys.modules:
                todo.append(sys.modules[name])
    return set(seen.values())


def key(*parts) -> str:
    """Stable hash of JSON-serialisable parts (dataclass reprs, digests, other keys)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=repr).encode()).hexdigest()[:20]


class PriorCache:
    """The keys in ``file`` (``priors/cache.json``): which step was last computed with which key."""

    def __init__(self, file: Path):
        self.file = file
        self.keys: dict[str, str] = json.loads(self.file.read_text()) if self.file.exists() else {}

    def fresh(self, step: str, k: str, *files: Path) -> bool:
        """True when ``step`` was computed with key ``k`` and its files are all there."""
        return self.keys.get(step) == k and all(f.exists() for f in files)

    def store(self, step: str, k: str) -> None:
        self.keys[step] = k
        write_json(self.file, self.keys)
