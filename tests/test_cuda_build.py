"""CI guard for the CUDA sources: compile the scaffold CUDA family for sm_80 and sm_90 and import it.

No GPU is needed, so a broken .cu fails CI on a CPU-only runner. The build runs in a
subprocess with its own build directory: the architecture list is pinned there and the
module never loads into the test process. Skips cleanly without nvcc or a CUDA build of torch.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cuda_ext
from tests.conftest import REPO, requires_compiler

EM_CUDA = 190  # ELF machine id of embedded CUDA cubins


def nvcc() -> Path | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    path = Path(home) / "bin" / "nvcc"
    return path if path.exists() else (Path(p) if (p := shutil.which("nvcc")) else None)


def cubin_archs(shared_object: Path) -> set[int]:
    """SM versions of the cubins embedded in a shared object (read from their ELF headers)."""
    data = shared_object.read_bytes()
    archs, start = set(), data.find(b"\x7fELF", 1)
    while start != -1:
        if data[start + 4] == 2 and struct.unpack_from("<H", data, start + 18)[0] == EM_CUDA:  # 64-bit, EM_CUDA
            archs.add((struct.unpack_from("<I", data, start + 48)[0] >> 8) & 0xFF)
        start = data.find(b"\x7fELF", start + 1)
    return archs


@pytest.mark.slow
@requires_compiler
@pytest.mark.skipif(nvcc() is None, reason="needs nvcc (set CUDA_HOME)")
@pytest.mark.skipif(torch.version.cuda is None, reason="needs a CUDA build of torch")
def test_scaffold_cuda_family_compiles_for_sm80_and_sm90():
    env = dict(
        os.environ,
        CUDA_HOME=str(nvcc().parent.parent),
        TORCH_CUDA_ARCH_LIST="8.0;9.0",
        RECON4D_BUILD_DIR=str(cuda_ext.build_root() / "ci_sm80_sm90"),
    )
    env.pop("TORCH_EXTENSIONS_DIR", None)
    script = (
        "import cuda_ext\n"
        "m = cuda_ext.build('scaffold_cuda')\n"
        "assert callable(m.skin_forward) and callable(m.skin_backward) and callable(m.knn), dir(m)\n"
        "print(m.__file__)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=1200)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    shared_object = Path(result.stdout.strip().splitlines()[-1])
    assert cubin_archs(shared_object) == {80, 90}
