"""`recon4d vqa` (issue 8)."""

from recon4d.commands._pending import not_built


def main(argv: list[str]) -> int:
    return not_built("vqa", 8)
