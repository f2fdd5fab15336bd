"""Motion scaffold: sparse nodes with one rigid transform per frame, and the skinning binding.

A node's transform at frame t maps canonical (reference-frame) world points to frame
t: ``x_t = R_j(t) x + t_j(t)``, so every node is the identity at the reference frame.
It is stored about the node's own centre p_j: ``x_t = R_j(t) (x - p_j) + p_j + o_j(t)``,
with the learned offset ``o_j(t)`` the node's displacement. Why: with the world-origin
form, a rotation step also swings the node by (rotation) x (its distance from the
origin, about the scene depth), so every rotation update throws the node sideways and
the translation has to chase it; about the centre, rotating a node only turns it.
Dynamic Gaussians bind to their K nearest nodes with weights
``exp(-d^2 / 2 sigma^2)`` times ``exp(correction)``, the correction learned, and are
blended by the fused ``cuda_ext.skin`` kernel (DQB by default).

A frame the fit never sees (a held-out frame) gets no gradient that knows where its
nodes are, so when the fit ends its transforms are interpolated from the nearest
fitted frames (``MotionScaffold.interpolate``), as its camera is.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from cuda_ext.knn import knn
from cuda_ext.skin import skin
from recon4d.geometry import quat_rotate


def between_seen(frames: frozenset[int], total: int) -> list[tuple[int, int, int, float]]:
    """For each of ``frames`` (of ``total``; frames a fit never saw): ``(t, before, after, w)``, its nearest
    other frames before and after it and the weight of the later one; beyond the first or last other frame
    both are that frame (``w = 0``). Empty when no frame outside ``frames`` exists."""
    seen = [t for t in range(total) if t not in frames]
    plan = []
    for t in sorted(frames) if seen else ():
        before = max((s for s in seen if s < t), default=None)
        after = min((s for s in seen if s > t), default=None)
        if before is None or after is None:
            nearest = after if before is None else before
            plan.append((t, nearest, nearest, 0.0))
        else:
            plan.append((t, before, after, (t - before) / (after - before)))
    return plan


class MotionScaffold(nn.Module):
    def __init__(self, node_pos: Tensor, node_quats: Tensor, node_trans: Tensor, latent_dim: int = 0):
        """node_pos [M,3] canonical; node_quats [T,M,4] (w,x,y,z); node_trans [T,M,3] world-origin translations."""
        super().__init__()
        self.register_buffer("node_pos", node_pos.float().clone())
        self.node_quats = nn.Parameter(node_quats.float().clone())
        with torch.no_grad():
            offsets = quat_rotate(F.normalize(self.node_quats, dim=-1), self.node_pos) + node_trans.float() - self.node_pos
        self.node_offsets = nn.Parameter(offsets)
        self.latents = nn.Parameter(node_pos.new_zeros(node_pos.shape[0], latent_dim))
        # ARAP pairs [E, 3] (node i, node j, level), set from the initial trajectories (fit.topology)
        self.register_buffer("arap_edges", torch.zeros(0, 3, dtype=torch.long, device=node_pos.device))

    @property
    def frames(self) -> int:
        return self.node_quats.shape[0]

    def __len__(self) -> int:
        return self.node_pos.shape[0]

    def node_positions(self, t: int | None = None) -> Tensor:
        """Node centres moved to frame t ([M,3]) or to every frame ([T,M,3])."""
        return self.node_pos + (self.node_offsets if t is None else self.node_offsets[t])

    @torch.no_grad()
    def interpolate(self, frames: frozenset[int]) -> None:
        """Give each of ``frames`` the node transforms interpolated between the nearest other frames' (see
        :func:`between_seen`): offsets linearly, rotations by normalised linear blending on one hemisphere.

        Why: a frame no step renders gets no gradient on its rotations, and on its offsets only the
        scaffold's smoothness and rigidity terms, so it would keep transforms far from its neighbours'
        (measured in docs/decisions.md)."""
        for t, before, after, w in between_seen(frames, self.frames):
            self.node_offsets[t] = (1 - w) * self.node_offsets[before] + w * self.node_offsets[after]
            q0, q1 = (F.normalize(self.node_quats[f], dim=-1) for f in (before, after))
            q1 = torch.where((q0 * q1).sum(-1, keepdim=True) < 0, -q1, q1)
            self.node_quats[t] = F.normalize((1 - w) * q0 + w * q1, dim=-1)

    def translations(self, t: int) -> Tensor:
        """World-origin translations ``t_j(t)`` [M,3] of frame t (what the skinning kernel takes)."""
        q = F.normalize(self.node_quats[t], dim=-1)
        return self.node_pos + self.node_offsets[t] - quat_rotate(q, self.node_pos)


class SkinBinding(nn.Module):
    """Which nodes each dynamic Gaussian follows, and how much."""

    def __init__(self, node_ids: Tensor, log_base: Tensor):
        """node_ids [N,K] int32, log_base [N,K] = -d^2 / 2 sigma^2 of each binding."""
        super().__init__()
        self.register_buffer("node_ids", node_ids.to(torch.int32))
        self.register_buffer("log_base", log_base.float())
        self.correction = nn.Parameter(torch.zeros_like(self.log_base))

    @classmethod
    def bind(cls, canon_means: Tensor, node_pos: Tensor, k: int = 8, sigma: float | None = None) -> "SkinBinding":
        """Bind each Gaussian to its k nearest nodes; sigma defaults to twice the median node spacing."""
        k = min(k, node_pos.shape[0])
        idx, dist2 = knn(canon_means.detach().float().contiguous(), node_pos.float().contiguous(), k)
        if sigma is None:
            spacing = dist2[:, 0].clamp(min=1e-12).sqrt().median() if len(dist2) else dist2.new_tensor(1.0)
            sigma = float(spacing.clamp(min=1e-6)) * 2.0
        return cls(idx, -dist2 / (2 * sigma**2))

    def weights(self) -> Tensor:
        """Normalised skinning weights [N,K] (softmax of base log-weight + learned correction)."""
        return torch.softmax(self.log_base + self.correction, dim=-1)

    def select(self, index: Tensor) -> None:
        """Keep (or repeat) bindings by index, in step with the dynamic GaussianSet."""
        self.node_ids = self.node_ids[index]
        self.log_base = self.log_base[index]
        self.correction = nn.Parameter(self.correction.detach()[index].clone())

    def deform(self, canon_means: Tensor, canon_quats: Tensor, scaffold: MotionScaffold, t: int,
               mode: str = "dqb") -> tuple[Tensor, Tensor]:
        """Means and rotations of the bound Gaussians at frame t."""
        return skin(canon_means, F.normalize(canon_quats, dim=-1), self.node_ids, self.weights(),
                    scaffold.node_quats[t], scaffold.translations(t), mode=mode)
