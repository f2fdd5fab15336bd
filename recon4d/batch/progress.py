"""What a batch shows while it runs and when it ends.

Why plain lines by default: batches run under SLURM and nohup as often as in a
terminal, and a log of one line per change (done / running / failed, ETA) reads
well in both; the final table uses rich, which tyro already pulls in.
"""

from __future__ import annotations

import sys
import time

from rich.console import Console
from rich.table import Table

from recon4d.batch.manifest import Manifest


def _clock(seconds: float) -> str:
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class Progress:
    """Counts of this run's scenes; prints a line when they change, or every ``every`` seconds."""

    def __init__(self, total: int, slots: int, skipped: int = 0, every: float = 30.0, stream=None):
        self.total, self.slots, self.skipped, self.every = total, max(1, slots), skipped, every
        self.stream = stream or sys.stdout
        self.started = time.monotonic()
        self.durations: list[float] = []
        self.last: tuple | None = None
        self.last_time = 0.0

    def eta(self, remaining: int) -> str:
        """Remaining scenes x mean scene time / parallel slots (unknown until one scene has ended)."""
        if not self.durations or remaining == 0:
            return "-" if remaining else "0:00:00"
        mean = sum(self.durations) / len(self.durations)
        return _clock(mean * -(-remaining // self.slots))

    def update(self, done: int, running: int, failed: int) -> None:
        state = (done, running, failed)
        if state == self.last and time.monotonic() - self.last_time < self.every:
            return
        self.last, self.last_time = state, time.monotonic()
        remaining = self.total - done - failed
        print(f"[batch {_clock(time.monotonic() - self.started)}] done {done}/{self.total}  running {running}  "
              f"failed {failed}  skipped {self.skipped}  ETA {self.eta(remaining)}", file=self.stream, flush=True)


def summary_table(manifest: Manifest, scenes: list[str], stream=None) -> None:
    """One row per scene of this batch: status, attempts, last duration, PSNR, error."""
    table = Table(title=f"batch {manifest.path}")
    for col in ("scene", "status", "attempts", "seconds", "psnr_train", "error / log"):
        table.add_column(col, overflow="fold")
    for name in scenes:
        rec = manifest.scenes[name]
        psnr = rec.metrics.get("psnr_train")
        table.add_row(name, rec.status, str(rec.attempts), f"{rec.durations[-1]:.1f}" if rec.durations else "-",
                      f"{psnr:.2f}" if isinstance(psnr, float) else "-",
                      f"{rec.error}  ({rec.log})" if rec.error else (rec.note or ""))
    Console(file=stream or sys.stdout, width=160).print(table)
