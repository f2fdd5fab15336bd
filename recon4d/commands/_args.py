"""Argument helpers shared by subcommands."""

from __future__ import annotations


def option_value(argv: list[str], option: str, default: str) -> str:
    """The value of ``option`` in argv (``--x v`` or ``--x=v``), read before tyro so it can pick defaults."""
    for i, arg in enumerate(argv):
        if arg == option and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(option + "="):
            return arg.split("=", 1)[1]
    return default
