"""`recon4d eval` (issue 6)."""

from recon4d.commands._pending import not_built


def main(argv: list[str]) -> int:
    return not_built("eval", 6)
