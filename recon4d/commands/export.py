"""`recon4d export` (issue 7)."""

from recon4d.commands._pending import not_built


def main(argv: list[str]) -> int:
    return not_built("export", 7)
