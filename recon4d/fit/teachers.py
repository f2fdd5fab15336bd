"""The fit's built-in feature teacher.

A teacher turns frames into per-frame token maps [T, h, w, C]; its maps are cached in
``priors/teachers/<name>.safetensors`` (:mod:`recon4d.scene.teachers`) and distilled into the
field through decoder heads (:mod:`recon4d.scene.heads`). Real teachers (InternVideo2,
Qwen2.5-VL, ...) come from ``recon4d vqa extract``; the ``patch`` teacher here is a fixed,
seeded random patch embedding (ViT-style stem), so tests and offline demos have a teacher
whose features depend on image content.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


@torch.no_grad()
def patch_teacher(images: Tensor, patch: int = 8, dim: int = 64, seed: int = 0) -> Tensor:
    """Seeded random patch embedding + GELU of frames [T,H,W,3] -> [T, H/patch, W/patch, dim]."""
    g = torch.Generator().manual_seed(seed)
    weight = torch.randn(dim, 3, patch, patch, generator=g) / (3 * patch * patch) ** 0.5 * 4
    bias = torch.randn(dim, generator=g) * 0.1
    x = images.permute(0, 3, 1, 2)
    return F.gelu(F.conv2d(x, weight, bias, stride=patch)).permute(0, 2, 3, 1).contiguous()
