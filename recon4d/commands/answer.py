"""`recon4d answer` (issue 10)."""

from recon4d.commands._pending import not_built


def main(argv: list[str]) -> int:
    return not_built("answer", 10)
