"""Shared answer for subcommands whose implementation has not landed yet."""

from __future__ import annotations

import sys


def not_built(command: str, issue: int) -> int:
    """Say clearly that a command is not available yet; exit code 2, no fake output."""
    print(
        f"recon4d {command}: not built yet (tracked in issue {issue}); nothing was done.",
        file=sys.stderr,
    )
    return 2
