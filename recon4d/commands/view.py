"""`recon4d view --scene DIR [--port N] [--host 127.0.0.1]`: browse a fitted scene in a web browser."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tyro

from recon4d.errors import UserError, expected_errors, log_tracebacks_to


@dataclass
class ViewCommand:
    scene: Path
    """A fitted scene folder (from `recon4d fit`)."""
    port: int = 8080
    host: str = "127.0.0.1"
    """Interface to bind; 127.0.0.1 keeps the scene on this machine (0.0.0.0 shares it on the network)."""


@expected_errors("view")
def main(argv: list[str]) -> int:
    from recon4d.render.fitted import load_fitted
    from recon4d.viewer.app import serve

    cmd = tyro.cli(ViewCommand, args=argv, prog="recon4d view")
    log_tracebacks_to(cmd.scene / "log.txt")
    fitted = load_fitted(cmd.scene, device="cpu")  # the browser gets numpy arrays; rendering stays on the CPU
    try:
        serve(fitted, cmd.host, cmd.port, log=lambda msg: print(msg, flush=True))
    except KeyboardInterrupt:  # Ctrl-C is how a viewer is stopped
        return 0
    except OSError as exc:  # port in use, host not local
        raise UserError(f"cannot serve on {cmd.host}:{cmd.port}: {exc}") from exc
    return 0
