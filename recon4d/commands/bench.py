"""`recon4d bench <what> [--quick]`: benchmarks that print ratios measured in one run.

Each benchmark lives in ``recon4d/bench/<what>.py`` with a ``main(argv)``; the last
lines it prints are machine-readable ``key=value`` pairs.
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "render": "forward+backward of the CPU rasterizer kernel vs its PyTorch twin",
    "skin": "forward+backward of the fused skinning kernel (DQB/LBS) vs its PyTorch twin",
    "priors": "seconds per preprocessing provider, 50 frames at 480x270 (DAVIS blackswan or synth)",
    "fit": "wall time, peak memory and per-stage seconds of whole fits (synthetic tiny, DAVIS blackswan)",
    "davis": "fit every DAVIS sequence of a folder: crashes, PSNR (training and held-out), cameras, VLM4D answers",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"} or argv[0] not in BENCHMARKS:
        rows = "\n".join(f"  {k:<8} {v}" for k, v in BENCHMARKS.items())
        print(f"usage: recon4d bench <what> [--quick] [options]\n\nbenchmarks:\n{rows}")
        return 0 if not argv or argv[0] in {"-h", "--help"} else 2
    module = importlib.import_module(f"recon4d.bench.{argv[0]}")
    return int(module.main(argv[1:]) or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
