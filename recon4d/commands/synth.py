"""`recon4d synth` (issue 4)."""

from recon4d.commands._pending import not_built


def main(argv: list[str]) -> int:
    return not_built("synth", 4)
