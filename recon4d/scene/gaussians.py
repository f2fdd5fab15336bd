"""A set of 3D Gaussians stored as unconstrained parameters (the activations live here).

Storage follows the 3DGS convention (log-scales, logit-opacities, unnormalised
quaternions) so Adam sees an unconstrained space; ``activated()`` gives what the
rasterizer takes. Colours are stored as logits, so rendered RGB stays in [0, 1].
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


def _logit(p: Tensor) -> Tensor:
    p = p.clamp(1e-4, 1 - 1e-4)
    return torch.log(p / (1 - p))


class GaussianSet(nn.Module):
    """N Gaussians with colour and an optional latent feature per Gaussian."""

    def __init__(self, means: Tensor, scales: Tensor, colors: Tensor, opacities: Tensor,
                 quats: Tensor | None = None, latent_dim: int = 0):
        super().__init__()
        n = means.shape[0]
        self.means = nn.Parameter(means.clone().float())
        self.log_scales = nn.Parameter(torch.log(scales.clamp(min=1e-6)).float())
        self.quats = nn.Parameter(quats.clone().float() if quats is not None else
                                  means.new_tensor([1.0, 0, 0, 0]).repeat(n, 1))
        self.opacity_logits = nn.Parameter(_logit(opacities.float()))
        self.color_logits = nn.Parameter(_logit(colors.float()))
        self.latents = nn.Parameter(means.new_zeros(n, latent_dim))

    def __len__(self) -> int:
        return self.means.shape[0]

    @property
    def scales(self) -> Tensor:
        return torch.exp(self.log_scales)

    @property
    def opacities(self) -> Tensor:
        return torch.sigmoid(self.opacity_logits)

    @property
    def colors(self) -> Tensor:
        return torch.sigmoid(self.color_logits)

    def select(self, index: Tensor) -> None:
        """Keep (or repeat) Gaussians by index or mask; used by densification and pruning."""
        for name, param in list(self.named_parameters(recurse=False)):
            setattr(self, name, nn.Parameter(param.detach()[index].clone()))
