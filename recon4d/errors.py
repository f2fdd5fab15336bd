"""The one exception type that means "the user can fix this": bad input, a missing stage, a folder that
is not a scene. The CLI prints such an error as one line and exits 2; anything else is a bug, whose
traceback goes to a log file while the terminal gets one line saying where."""

from __future__ import annotations


class UserError(Exception):
    """An expected failure with a message that says what went wrong and what to do."""
