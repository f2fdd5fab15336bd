"""`recon4d export --scene DIR [--frames SPEC]`: 3DGS PLY splats and a nerfstudio transforms.json."""

from __future__ import annotations

import tyro

from recon4d.errors import UserError, expected_errors, log_tracebacks_to
from recon4d.export.job import ExportJob


@expected_errors("export")
def main(argv: list[str]) -> int:
    from recon4d.export.job import run_export

    job = tyro.cli(ExportJob, args=argv, prog="recon4d export")
    log_tracebacks_to(job.scene / "log.txt")
    try:
        run_export(job)
    except ValueError as exc:  # a bad --frames for this scene
        raise UserError(str(exc)) from exc
    return 0
