"""3D Gaussian Splatting PLY files: the layout common splat viewers read, plus our latents.

Vertex properties, in the order of the original 3DGS code's files:
``x y z nx ny nz f_dc_0..2 opacity scale_0..2 rot_0..3`` then, optionally,
``latent_0..L-1`` (viewers ignore properties they do not know). Stored values are
the unactivated ones of that format: colour as the degree-0 spherical-harmonic
coefficient ``(c - 0.5) / C0``, opacity as a logit, scales as logs, rotations as
(w, x, y, z) quaternions. Normals are zero (3DGS writes them but never uses them).

A dynamic scene is one static file plus one file of the dynamic Gaussians per
frame: the static part does not move, so it is written once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from plyfile import PlyData, PlyElement
from torch import Tensor

from recon4d.io.atomic import atomic_path

SH_C0 = 0.28209479177387814  # the degree-0 real spherical harmonic, 1 / (2 sqrt(pi))


@dataclass
class Splats:
    """Activated Gaussians, as the rasterizer takes them."""

    means: Tensor  # [N,3]
    quats: Tensor  # [N,4] (w,x,y,z)
    scales: Tensor  # [N,3]
    opacities: Tensor  # [N]
    colors: Tensor  # [N,3] RGB in [0,1]
    latents: Tensor  # [N,L] (L may be 0)

    def __len__(self) -> int:
        return self.means.shape[0]

    @staticmethod
    def cat(parts: list["Splats"]) -> "Splats":
        return Splats(*(torch.cat([getattr(p, f) for p in parts]) for f in
                        ("means", "quats", "scales", "opacities", "colors", "latents")))


def _logit(p: Tensor) -> Tensor:
    p = p.clamp(1e-7, 1 - 1e-7)
    return torch.log(p) - torch.log1p(-p)


def write_ply(path: Path, splats: Splats, latents: bool = True) -> Path:
    """Write ``splats`` as a binary little-endian 3DGS PLY, atomically."""
    L = splats.latents.shape[1] if latents else 0
    names = (["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
              "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
             + [f"latent_{i}" for i in range(L)])
    cols = [splats.means, torch.zeros_like(splats.means), (splats.colors - 0.5) / SH_C0,
            _logit(splats.opacities)[:, None], torch.log(splats.scales), splats.quats]
    if L:
        cols.append(splats.latents)
    values = torch.cat([c.detach().float().cpu() for c in cols], 1).numpy()
    vertex = np.empty(len(values), dtype=[(n, "<f4") for n in names])
    for i, n in enumerate(names):
        vertex[n] = values[:, i]
    with atomic_path(path) as tmp:
        PlyData([PlyElement.describe(vertex, "vertex")], byte_order="<").write(str(tmp))
    return Path(path)


def read_ply(path: Path) -> Splats:
    """Read a 3DGS PLY (ours or any with the standard properties) back into activated splats."""
    v = PlyData.read(str(path))["vertex"]
    col = lambda *names: torch.from_numpy(np.stack([np.asarray(v[n], np.float32) for n in names], 1))  # noqa: E731
    props = {p.name for p in v.properties}
    n_latent = sum(1 for p in props if p.startswith("latent_"))
    return Splats(
        means=col("x", "y", "z"),
        quats=col("rot_0", "rot_1", "rot_2", "rot_3"),
        scales=torch.exp(col("scale_0", "scale_1", "scale_2")),
        opacities=torch.sigmoid(col("opacity")[:, 0]),
        colors=col("f_dc_0", "f_dc_1", "f_dc_2") * SH_C0 + 0.5,
        latents=col(*(f"latent_{i}" for i in range(n_latent))) if n_latent else torch.zeros(len(v.data), 0),
    )
