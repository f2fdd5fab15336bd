"""The decoder heads that map the field's latent to a teacher's feature space, and the grid they compare on.

Saved with the scene (:mod:`recon4d.scene.state`), trained by the fit's ``features`` stage, and
applied by every reader of a fit that decodes features (render, eval, the VQA bridge).
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn


class FeatureHead(nn.Module):
    """Per-pixel MLP: latent [..., L] -> teacher features [..., C]."""

    def __init__(self, latent_dim: int, out_dim: int, hidden: int = 64):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(latent_dim, hidden), nn.GELU(), nn.Linear(hidden, out_dim))

    def forward(self, latent: Tensor) -> Tensor:
        return self.net(latent)


def to_grid(latent: Tensor, h: int, w: int) -> Tensor:
    """Area-average a rendered map [H,W,L] down to a teacher's token grid [h,w,L]."""
    return F.adaptive_avg_pool2d(latent.permute(2, 0, 1)[None], (h, w))[0].permute(1, 2, 0)
