"""Fingerprint fitted scene folders, or compare two, to prove a change left fits bit-identical.

Why: a refactor must not change what a fit computes, and the CPU path is deterministic, so the
model's tensors, the prior files and the quality numbers of ``metrics.json`` of a fit made
before and after must agree to the last bit. Timings, peak memory and the checkpoint's id and
config (whose fields may be renamed) are left out: they are not the fit's result.

    python scripts/fingerprint.py SCENE            # one line per part: name and SHA-256
    python scripts/fingerprint.py BEFORE AFTER     # the parts that differ; exit 1 if any
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file

VOLATILE_METRICS = {"stage_seconds", "fit_seconds", "peak_rss_mib", "peak_cuda_mib"}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def fingerprint(scene: Path) -> dict[str, str]:
    """Part name -> digest: every model tensor, every array of every prior file, the refined cameras
    and each quality number of metrics.json."""
    parts: dict[str, str] = {}
    for file in sorted((scene / "model").glob("*.safetensors")):
        for name, array in sorted(load_file(str(file)).items()):
            parts[f"{file.name}:{name}"] = _digest(array.tobytes()) + str(array.shape)
    for file in sorted((scene / "priors").rglob("*.npz")):
        with np.load(file) as z:
            for name in sorted(z.files):
                parts[f"{file.relative_to(scene)}:{name}"] = _digest(z[name].tobytes())
    for file in sorted((scene / "priors").rglob("*.safetensors")):
        for name, array in sorted(load_file(str(file)).items()):
            parts[f"{file.relative_to(scene)}:{name}"] = _digest(array.tobytes())
    cameras = scene / "model" / "cameras.json"
    if cameras.exists():
        parts["model/cameras.json"] = _digest(json.dumps({k: v for k, v in json.loads(cameras.read_text()).items()
                                                          if k != "checkpoint"}, sort_keys=True).encode())
    camera = scene / "priors" / "camera.json"
    if camera.exists():
        parts["priors/camera.json"] = _digest(camera.read_bytes())
    metrics = scene / "metrics.json"
    if metrics.exists():
        for name, value in sorted(json.loads(metrics.read_text()).items()):
            if name not in VOLATILE_METRICS:
                parts[f"metrics:{name}"] = repr(value) if not isinstance(value, list) else _digest(repr(value).encode())
    return parts


def main(args: list[str]) -> int:
    if len(args) == 1:
        for name, digest in fingerprint(Path(args[0])).items():
            print(name, digest)
        return 0
    if len(args) != 2:
        print("usage: python scripts/fingerprint.py SCENE [OTHER_SCENE]", file=sys.stderr)
        return 2
    before, after = (fingerprint(Path(a)) for a in args)
    differ = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    for name in differ:
        print(f"differs: {name}: {before.get(name)} -> {after.get(name)}")
    print(f"{len(before.keys() & after.keys()) - len([k for k in differ if k in before and k in after])} parts equal, "
          f"{len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
