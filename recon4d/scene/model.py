"""DynamicScene: static Gaussians + dynamic Gaussians on a motion scaffold, with latents.

``at(t)`` assembles the Gaussians of frame t in one set, with per-Gaussian channels
``[r, g, b, dynamic, latent...]``: RGB, a 0/1 flag whose rendering is the soft dynamic
mask, and the feature-field latent (static Gaussians own theirs; dynamic ones blend
their nodes' latents with the skinning weights). One rasterizer call renders them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from recon4d.scene.gaussians import GaussianSet
from recon4d.scene.scaffold import MotionScaffold, SkinBinding

RGB, DYN = slice(0, 3), slice(3, 4)
LATENT_START = 4


@dataclass
class FrameGaussians:
    means: Tensor
    quats: Tensor
    scales: Tensor
    opacities: Tensor
    features: Tensor  # [N, 4 + latent_dim]
    n_static: int

    def as_args(self) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        return self.means, self.quats, self.scales, self.opacities, self.features


class DynamicScene(nn.Module):
    def __init__(self, static: GaussianSet, dynamic: GaussianSet, scaffold: MotionScaffold,
                 binding: SkinBinding, skin_mode: str = "dqb", reference_frame: int = 0):
        super().__init__()
        self.reference_frame = reference_frame  # the frame whose space is canonical (nodes = identity)
        self.static = static
        self.dynamic = dynamic
        self.scaffold = scaffold
        self.binding = binding
        self.skin_mode = skin_mode

    @property
    def latent_dim(self) -> int:
        return self.static.latents.shape[1]

    @property
    def frames(self) -> int:
        return self.scaffold.frames

    def dynamic_latents(self) -> Tensor:
        """Each dynamic Gaussian's latent: its nodes' latents blended by the skinning weights, ``[N, L]``.

        Gathered with ``index_select``, not ``latents[node_ids]``: the backward of indexing
        accumulates into the nodes with atomic adds on the CPU, in an order that changes from run
        to run, so the features stage was not reproducible; ``index_select``'s backward sums in a
        fixed order (and is faster).
        """
        ids = self.binding.node_ids.long()
        latents = self.scaffold.latents
        lat = torch.index_select(latents, 0, ids.reshape(-1)).view(*ids.shape, latents.shape[1])  # [N, K, L]
        return (self.binding.weights()[..., None] * lat).sum(1)

    def at(self, t: int, include_static: bool = True, include_dynamic: bool = True,
           with_latents: bool = True) -> FrameGaussians:
        """The Gaussians of frame t; ``with_latents=False`` leaves the latent channels out (features
        ``[N, 4]``), which spares building the ``[N_dyn, K, latent]`` blend of node latents where no latent
        is rendered (every fit stage but ``features``)."""
        st, dy = self.static, self.dynamic
        parts = []
        if include_static and len(st):
            flag = torch.zeros(len(st), 1, device=st.means.device)
            parts.append((st.means, st.quats, st.scales, st.opacities,
                          torch.cat([st.colors, flag, *([st.latents] if with_latents else [])], -1)))
        if include_dynamic and len(dy):
            means, quats = self.binding.deform(dy.means, dy.quats, self.scaffold, t, self.skin_mode)
            flag = torch.ones(len(dy), 1, device=dy.means.device)
            parts.append((means, quats, dy.scales, dy.opacities,
                          torch.cat([dy.colors, flag, *([self.dynamic_latents()] if with_latents else [])], -1)))
        if not parts:  # nothing to draw, e.g. the dynamic part of a scene in which nothing moves
            parts.append((st.means[:0], st.quats[:0], st.scales[:0], st.opacities[:0],
                          torch.cat([st.colors, st.colors[:, :1], *([st.latents] if with_latents else [])], -1)[:0]))
        cat = [torch.cat(x) for x in zip(*parts)]
        return FrameGaussians(*cat, n_static=len(st) if include_static else 0)
