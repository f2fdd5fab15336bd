"""Feature teachers and the decoder heads that map the 32-channel latent to a teacher's space.

A teacher turns frames into per-frame token maps [T, h, w, C]; its maps are cached in
``priors/teachers/<name>.safetensors`` (key ``features``) and distilled into the field.
Real teachers (InternVideo2, Qwen2.5-VL, ...) come from ``recon4d vqa extract``; the
``patch`` teacher here is a fixed, seeded random patch embedding (ViT-style stem), so
tests and offline demos have a teacher whose features depend on image content.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import Tensor, nn

from recon4d.io.atomic import atomic_path


class FeatureHead(nn.Module):
    """Per-pixel MLP: latent [..., L] -> teacher features [..., C]."""

    def __init__(self, latent_dim: int, out_dim: int, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(latent_dim, hidden), nn.GELU(), nn.Linear(hidden, out_dim))

    def forward(self, latent: Tensor) -> Tensor:
        return self.net(latent)


@torch.no_grad()
def patch_teacher(images: Tensor, patch: int = 8, dim: int = 64, seed: int = 0) -> Tensor:
    """Seeded random patch embedding + GELU of frames [T,H,W,3] -> [T, H/patch, W/patch, dim]."""
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(dim, 3, patch, patch, generator=g) / (3 * patch * patch) ** 0.5 * 4
    bias = torch.randn(dim, generator=g) * 0.1
    x = images.permute(0, 3, 1, 2)
    return F.gelu(F.conv2d(x, weight, bias, stride=patch)).permute(0, 2, 3, 1).contiguous()


def write_teacher(scene: Path, name: str, features: Tensor) -> Path:
    path = Path(scene) / "priors" / "teachers" / f"{name}.safetensors"
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        save_file({"features": features.float().contiguous()}, str(tmp))
    return path


def to_grid(latent: Tensor, h: int, w: int) -> Tensor:
    """Area-average a rendered map [H,W,L] down to a teacher's token grid [h,w,L]."""
    return F.adaptive_avg_pool2d(latent.permute(2, 0, 1)[None], (h, w))[0].permute(1, 2, 0)
