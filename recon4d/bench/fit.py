"""`recon4d bench fit`: wall time and peak memory of whole fits, with a per-stage breakdown.

Each case runs ``recon4d fit`` in a child process that reports its own peak resident
memory (``ru_maxrss``) into a temporary folder, then reads the
per-stage seconds the fit recorded in ``metrics.json``. Cases: the tiny synthetic
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


# Runs the CLI and reports its own peak RSS on stderr, so earlier children do not count.
_MEASURED = ("import resource, sys; from recon4d.cli import main; rc = main(sys.argv[1:]); "
             "print('PEAK_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr); sys.exit(rc)")


def _run(args: list[str]) -> tuple[float, float, int]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _MEASURED, *args], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    peak = [line.split()[1] for line in proc.stderr.splitlines() if line.startswith("PEAK_KB")]
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
    return seconds, float(peak[-1]) / 1024 if peak else float("nan"), proc.returncode


def main(argv: list[str]) -> int:
    cfg = tyro.cli(BenchFitConfig, args=argv, prog="recon4d bench fit")
    exe = [sys.executable, "-m", "recon4d.cli"]
    rows = []
    with tempfile.TemporaryDirectory(prefix="recon4d-bench-fit-") as tmp:
        tmp = Path(tmp)
        for case in cfg.cases:
            if case == "synth-tiny":
                subprocess.run(exe + ["synth", "--preset", "tiny", "--out", str(tmp / "synth"), "--motion", "left"],
                               check=True, capture_output=True)
                source, priors = tmp / "synth" / "synth_s0", cfg.priors
            else:
                source, priors = cfg.davis / case, "auto"
                if not source.exists():
                    print(f"{case}: skipped ({source} not found)")
                    continue
            seconds, peak_mb, rc = _run(["fit", "--video", str(source), "--out", str(tmp / "fit"),
                                               "--preset", cfg.preset, "--priors", priors])
            metrics_file = tmp / "fit" / source.name / "metrics.json"
            metrics = json.loads(metrics_file.read_text()) if metrics_file.exists() else {}
            rows.append((case, rc, seconds, peak_mb, metrics))
    print(f"{'case':<12} {'status':<7} {'total_s':>8} {'peak_MiB':>9} {'psnr':>6}  per-stage seconds")
    for case, rc, seconds, peak, m in rows:
        stages = " ".join(f"{k}={v:.1f}" for k, v in m.get("stage_seconds", {}).items())
        status = "ok" if rc == 0 else f"rc={rc}"
        print(f"{case:<12} {status:<7} {seconds:>8.1f} {peak:>9.0f} {m.get('psnr_train', float('nan')):>6.2f}  {stages}")
    return 0 if all(row[1] == 0 for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
