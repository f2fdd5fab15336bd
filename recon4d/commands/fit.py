"""`recon4d fit` (issue 6)."""

from recon4d.commands._pending import not_built


def main(argv: list[str]) -> int:
    return not_built("fit", 6)
