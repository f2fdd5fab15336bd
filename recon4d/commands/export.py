"""`recon4d export --scene DIR [--frames SPEC]`: 3DGS PLY splats and a nerfstudio transforms.json."""

from __future__ import annotations

import sys

import tyro

from recon4d.export.job import ExportJob


def main(argv: list[str]) -> int:
    from recon4d.export.job import run_export
    from recon4d.fit.data import MissingStageError

    job = tyro.cli(ExportJob, args=argv, prog="recon4d export")
    try:
        run_export(job)
    except (MissingStageError, ValueError) as exc:
        print(f"recon4d export: {exc}", file=sys.stderr)
        return 2
    return 0
