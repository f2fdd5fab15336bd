"""`recon4d batch` (issue 9)."""

from recon4d.commands._pending import not_built


def main(argv: list[str]) -> int:
    return not_built("batch", 9)
