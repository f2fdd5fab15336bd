"""Atomic file writes: write to a temp name in the same folder, then ``os.replace``.

A stage killed half-way must never leave a truncated file that a later run would
trust (the scene folder is a resumable cache, see docs/design.md). ``os.replace`` is
atomic on POSIX when source and target are on the same file system, which is why
the temp file lives next to the target rather than in /tmp.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temp path to write to; on success it is renamed onto ``path``.

    The temp name keeps the target's suffix because many writers (cv2, numpy,
    PyAV) choose the format from it. On error the temp file is removed and the
    target is left untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}{path.suffix}")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically and return the path."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically and return the path."""
    return write_bytes(path, text.encode("utf-8"))


def write_json(path: str | os.PathLike, obj: Any, indent: int | None = 1) -> Path:
    """Write ``obj`` as JSON atomically (keys in insertion order, newline at the end)."""
    return write_text(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def staged_path(path: str | os.PathLike) -> Path:
    """The name ``atomic_group`` writes ``path`` under before renaming it into place.

    Fixed rather than per process, unlike ``atomic_path``'s: a reader can then find the
    staged files of a group whose renames a kill interrupted and finish them, and the
    next write of the group replaces whatever an earlier kill left behind.
    """
    path = Path(path)
    return path.with_name(f".{path.stem}.staged{path.suffix}")


@contextlib.contextmanager
def atomic_group(paths: list[Path]) -> Iterator[list[Path]]:
    """Write files that are valid only together: yield one staged path per target
    (see ``staged_path``); when the block succeeds, rename each onto its target, in order.

    Each rename is atomic, the group is not: a kill between two renames leaves the
    first targets new and the others old, with their new versions complete at their
    staged names (the renames start only once every file is written). So a reader
    must be able to tell the files' versions apart (the checkpoint ids of
    ``Trainer.save``), and the last target should be the one whose presence says
    the group exists. If the block raises, the staged files are removed and every
    target is left untouched.
    """
    paths = [Path(p) for p in paths]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
    staged = [staged_path(p) for p in paths]
    try:
        yield staged
    except BaseException:
        for tmp in staged:
            tmp.unlink(missing_ok=True)
        raise
    for tmp, path in zip(staged, paths):
        os.replace(tmp, path)
