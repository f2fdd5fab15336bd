"""Independent single-threaded solves side by side on the machine's cores (the camera solve's adjustments)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

Item = TypeVar("Item")
Result = TypeVar("Result")


def map_single_threaded(fn: Callable[[Item], Result], items: Iterable[Item]) -> list[Result]:
    """``[fn(item) for item in items]``, in order, on as many threads as torch may use, each torch op on one
    thread and warnings off.

    Why threads: a bundle adjustment is thousands of small numpy, scipy and torch calls that release the GIL
    for most of their time, and the camera solve's adjustments (one per start and field of view) do not
    depend on one another. Why one torch thread per op: on tensors this small extra threads only contend
    (ten times slower), and a reduction's order stays what it is on one core, so the cameras are the same
    whatever the machine's cores. Why warnings off for the whole map: the optimiser warns on steps it
    rejects, and ``warnings.catch_warnings`` is process-wide, so the threads cannot each set and restore it."""
    items = list(items)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if threads == 1 or len(items) < 2:
                return [fn(item) for item in items]
            with ThreadPoolExecutor(min(threads, len(items))) as pool:
                return list(pool.map(fn, items))
    finally:
        torch.set_num_threads(threads)
