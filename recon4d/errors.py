"""The one exception type that means "the user can fix this": bad input, a missing stage, a folder that
is not a scene. The CLI prints such an error as one line and exits 2; anything else is a bug, whose
traceback goes to a log file while the terminal gets one line saying where.

Two pieces, so the policy lives here and nowhere else:

* :func:`expected_errors` decorates every subcommand's ``main``: a :class:`UserError` becomes
  ``recon4d <command>: <message>`` on stderr and exit code 2. It sits on the command, not only in
  the CLI, because scripts and tests call the mains directly and read their exit codes.
* :func:`internal_error` is what ``recon4d.cli.main`` does with any other exception: the traceback
  goes to the log a command declared with :func:`log_tracebacks_to` (its scene's ``log.txt``), else
  to :func:`fallback_log`, and stderr gets one line naming that file. Bugs stay loud (a traceback)
  for callers of a command's ``main`` other than the CLI.
"""

from __future__ import annotations

import functools
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path


class UserError(Exception):
    """An expected failure with a message that says what went wrong and what to do."""


_traceback_log: Path | None = None


def log_tracebacks_to(path: Path | str | None) -> None:
    """Send the traceback of an unexpected failure of the running command to ``path`` (appended).

    A command working on a scene folder calls this with ``<scene>/log.txt`` once it knows the folder,
    so the traceback lands beside the log of the run that failed; ``None`` restores the default.
    """
    global _traceback_log
    _traceback_log = None if path is None else Path(path)


def fallback_log() -> Path:
    """``$XDG_CACHE_HOME/recon4d/last-error.txt`` (``~/.cache/recon4d/...`` when unset): the traceback
    of the last failure of a command that declared no scene log (overwritten each time)."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "recon4d" / "last-error.txt"


def expected_errors(command: str) -> Callable:
    """Decorator for a subcommand's entry point: a UserError ends it with one line and exit code 2."""

    def wrap(fn: Callable[..., int]) -> Callable[..., int]:
        @functools.wraps(fn)
        def guarded(*args, **kwargs) -> int:
            try:
                return fn(*args, **kwargs)
            except UserError as err:
                return user_error(command, err)

        return guarded

    return wrap


def user_error(command: str, err: UserError) -> int:
    """The one line of an expected failure; exit code 2."""
    print(f"recon4d {command}: {err}", file=sys.stderr)
    return 2


def _write_traceback(command: str, exc: BaseException) -> Path | None:
    """The file now holding ``exc``'s traceback: appended to the declared scene log (when its folder
    exists), else written to the fallback; None when neither can be written (a read-only disk)."""
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    entry = f"{time.strftime('%Y-%m-%d %H:%M:%S')} recon4d {command}: internal error\n{text}"
    if _traceback_log is not None:
        try:
            with open(_traceback_log, "a") as f:
                f.write(entry)
            return _traceback_log
        except OSError:
            pass
    path = fallback_log()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(entry)
        return path
    except OSError:
        return None


def internal_error(command: str, exc: BaseException) -> int:
    """Report a bug in one line (type, message, where the traceback is) and return exit code 1."""
    path = _write_traceback(command, exc)
    message = next((line for line in str(exc).splitlines() if line.strip()), "")
    where = f"full traceback in {path}" if path else "no log file could be written; traceback above"
    if path is None:
        traceback.print_exception(type(exc), exc, exc.__traceback__)
    print(f"recon4d {command}: internal error: {type(exc).__name__}: {message} ({where})", file=sys.stderr)
    return 1
