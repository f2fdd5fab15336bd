"""`recon4d build`: compile every kernel now, not at the first call of a fit (``make setup`` runs it).

Builds recon4d's kernel families (the CPU rasterizer and scaffold kernels; the scaffold's
CUDA kernels where nvcc exists) and, on a machine with a GPU, gsplat's CUDA kernels,
each in a folder keyed by torch version and architecture, under a file lock (see
``recon4d.kernels``). Exit 0 when every CPU family is built and every GPU build that was
asked for is; 2 otherwise, with the reason per kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import tyro

from recon4d.errors import UserError, expected_errors


@dataclass
class BuildCommand:
    gsplat: Literal["auto", "yes", "no"] = "auto"
    """Build gsplat's CUDA kernels: auto = when a GPU is visible (a login node without one can say yes)."""
    archs: str | None = None
    """GPU architectures of the CUDA builds, e.g. "8.0;9.0" (A100 and H100); default: this GPU, else 8.0;9.0."""


@expected_errors("build")
def main(argv: list[str]) -> int:
    cmd = tyro.cli(BuildCommand, args=argv, prog="recon4d build")
    import torch

    import cuda_ext
    from recon4d.kernels import build_all

    if cmd.archs:
        os.environ["TORCH_CUDA_ARCH_LIST"] = cmd.archs
    with_gsplat = cmd.gsplat == "yes" or (cmd.gsplat == "auto" and torch.cuda.is_available())
    results = build_all(with_gsplat, log=lambda msg: print(f"build: {msg}"))
    failed = [name for name, status in results.items() if status != "ok" and _required(name, with_gsplat)]
    if failed:
        raise UserError(f"not built: {', '.join(failed)} (reasons above)")
    print(f"build: done, in {cuda_ext.build_root()}")
    return 0


def _required(name: str, with_gsplat: bool) -> bool:
    """A kernel whose absence is a failure: every CPU family, a CUDA family where its toolchain exists (a
    compile error, not a machine without nvcc), gsplat when asked for."""
    import cuda_ext

    if name == "gsplat":
        return with_gsplat
    family = cuda_ext.FAMILIES[name]
    return not family.cuda or cuda_ext.missing_toolchain(family) is None
