"""`recon4d bench fit`: wall time and peak memory of whole fits, with a per-stage breakdown.

Each case runs ``recon4d fit`` in a child process (so earlier cases do not count towards its
peak memory) in a temporary folder, then reads the peak resident memory and the per-stage
seconds the fit recorded in ``metrics.json``. Cases: the tiny synthetic
preset (generated on the spot) and, when ../shared/data is present, DAVIS blackswan
with the ``cpu-preview`` preset.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import tyro

REPO = Path(__file__).resolve().parents[2]


@dataclass
class BenchFitConfig:
    """Time whole fits on this machine."""

    cases: tuple[str, ...] = ("synth-tiny", "blackswan")
    priors: str = "auto"
    """auto: computed priors (the real pipeline); gt: exact priors (synthetic case only)."""
    preset: str = "cpu-preview"
    davis: Path = REPO.parent / "shared" / "data" / "davis"


CLI = [sys.executable, "-m", "recon4d.cli"]


def _run(args: list[str]) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run(CLI + args, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
    return seconds, proc.returncode


def main(argv: list[str]) -> int:
    cfg = tyro.cli(BenchFitConfig, args=argv, prog="recon4d bench fit")
    rows = []
    with tempfile.TemporaryDirectory(prefix="recon4d-bench-fit-") as tmp:
        tmp = Path(tmp)
        for case in cfg.cases:
            if case == "synth-tiny":
                subprocess.run(CLI + ["synth", "--preset", "tiny", "--out", str(tmp / "synth"), "--motion", "left"],
                               check=True, capture_output=True)
                source, priors = tmp / "synth" / "synth_s0", cfg.priors
            else:
                source, priors = cfg.davis / case, "auto"
                if not source.exists():
                    print(f"{case}: skipped ({source} not found)")
                    continue
            seconds, rc = _run(["fit", "--video", str(source), "--out", str(tmp / "fit"),
                                               "--preset", cfg.preset, "--priors", priors])
            metrics_file = tmp / "fit" / source.name / "metrics.json"
            metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
            rows.append((case, rc, seconds, metrics.get("peak_rss_mib", float("nan")), metrics))
    print(f"{'case':<12} {'status':<7} {'total_s':>8} {'peak_MiB':>9} {'psnr':>6}  per-stage seconds")
    for case, rc, seconds, peak, m in rows:
        stages = " ".join(f"{k}={v:.1f}" for k, v in m.get("stage_seconds", {}).items())
        status = "ok" if rc == 0 else f"rc={rc}"
        print(f"{case:<12} {status:<7} {seconds:>8.1f} {peak:>9.0f} {m.get('psnr_train', float('nan')):>6.2f}  {stages}")
    return 0 if all(row[1] == 0 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
