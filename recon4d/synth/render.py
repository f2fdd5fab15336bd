"""Render a synthetic scene with the project's rasterizer: RGB, object masks and depth.

Masks are not drawn separately: each object's Gaussians carry a one-hot channel
next to their RGB, and the same ``rasterize`` call composites both, so a pixel's
mask id always agrees with the colour it shows (occlusion included). The depth
is the rasterizer's expected depth, i.e. exactly what a fitted scene would render.

The background surfaces (backdrop, ground) are made of coplanar discs whose depth
order flips with the view (``assets.background``), so their colour cannot come
from one depth-sorted call: each surface is rendered one tone per call and the
tones mixed by coverage (order-free). The ground and the objects then share one
call in which the ground's discs carry, instead of colour, a channel that is 1:
its composited weight (order-free among the ground's own discs, occluded by an
object in front, and occluding the object's Gaussian tails that reach below the
ground) multiplies the ground's mixed colour. The backdrop, behind everything
(the single depth-sorted pass drew the far ground over its base), goes under
that call.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from recon4d.render import rasterize
from recon4d.synth.assets import SKY, Gaussians, background, object_gaussians
from recon4d.synth.scene import COLOURS, Scene

MASK_THRESHOLD = 0.5  # a pixel belongs to an object when its one-hot channel composites above this


@dataclass
class Frame:
    """One rendered view: what goes to JPEGImages/, Annotations/ and gt/depth."""

    rgb: np.ndarray  # [H, W, 3] uint8
    ids: np.ndarray  # [H, W] uint8, 0 = background, k = scene.objects[k-1]
    depth: np.ndarray  # [H, W] float32, expected camera z (0 where nothing was hit)
    alpha: np.ndarray  # [H, W] float32 accumulated opacity


@dataclass
class _Surface:
    """A background surface rendered tone by tone and mixed by coverage, each field ``[C, H, W, ·]``.

    The tones are coplanar, so none is in front of another: colours and depths are
    averaged with the tones' coverages as weights, which no view changes.
    """

    colour: torch.Tensor  # not premultiplied
    alpha: torch.Tensor
    depth: torch.Tensor

    @staticmethod
    def mix(tones: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]) -> _Surface:
        """From each tone's (premultiplied colour, alpha, expected depth)."""
        cover = sum(a for _, a, _ in tones).clamp(min=1e-10)
        alpha = 1.0 - torch.prod(torch.stack([1.0 - a for _, a, _ in tones]), 0)
        return _Surface(sum(f for f, _, _ in tones) / cover, alpha, sum(a * z for _, a, z in tones) / cover)


class SceneRenderer:
    """Holds a scene's Gaussians and renders any frame from any set of cameras."""

    def __init__(self, scene: Scene, detail: float):
        self.scene = scene
        self.backdrop, self.ground = background(detail)  # each a list of tones
        self.assets = [object_gaussians(o.shape, COLOURS[o.colour], detail) for o in scene.objects]

    @property
    def num_gaussians(self) -> int:
        return sum(len(g) for g in self.backdrop + self.ground) + sum(len(a) for a in self.assets)

    def objects_at(self, frame: int) -> tuple[Gaussians, np.ndarray]:
        """The objects' Gaussians posed at ``frame`` and their features ``[N, 3 + num_objects]``."""
        k = len(self.assets)
        parts, onehots = [], []
        for i, (obj, local) in enumerate(zip(self.scene.objects, self.assets)):
            c, s = np.cos(obj.yaw[frame]), np.sin(obj.yaw[frame])
            rot = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
            parts.append(
                Gaussians(local.means @ rot.T + obj.centre[frame], local.quats, local.scales, local.opacities, local.colours)
            )
            onehot = np.zeros((len(local), k))
            onehot[:, i] = 1.0
            onehots.append(onehot)
        g = Gaussians.cat(parts)
        return g, np.concatenate([g.colours, np.concatenate(onehots)], axis=-1)

    def render(self, frame: int, viewmats: np.ndarray, Ks: np.ndarray) -> list[Frame]:
        """Render ``frame`` from cameras ``viewmats [C,4,4]`` with intrinsics ``Ks [C,3,3]``."""
        k = len(self.assets)
        backdrop, ground = (self._surface(tones, viewmats, Ks) for tones in (self.backdrop, self.ground))
        parts, feats = [], []
        for g in self.ground:  # black, its weight channel lit
            parts.append(g)
            feats.append(np.concatenate([np.zeros((len(g), 3 + k)), np.ones((len(g), 1))], -1))
        if k:
            g, f = self.objects_at(frame)
            parts.append(g)
            feats.append(np.concatenate([f, np.zeros((len(g), 1))], -1))
        out, alpha, depth = self._rasterize(Gaussians.cat(parts), np.concatenate(feats), viewmats, Ks)
        behind = backdrop.alpha * backdrop.colour + (1.0 - backdrop.alpha) * torch.tensor(SKY, dtype=out.dtype)
        rgb = out[..., :3] + out[..., -1:] * ground.colour + (1.0 - alpha) * behind
        z = alpha * depth + (1.0 - alpha) * backdrop.alpha * backdrop.depth
        alpha = alpha + (1.0 - alpha) * backdrop.alpha
        depth = z / alpha.clamp(min=1e-10)
        frames = []
        for c in range(viewmats.shape[0]):
            f = out[c, ..., 3:3 + k].numpy()
            ids = np.zeros(f.shape[:2], np.uint8)
            if k:
                ids = np.where(f.max(-1) > MASK_THRESHOLD, f.argmax(-1) + 1, 0).astype(np.uint8)
            image = np.clip(np.round(rgb[c].numpy() * 255.0), 0, 255).astype(np.uint8)
            frames.append(Frame(image, ids, depth[c, ..., 0].numpy(), alpha[c, ..., 0].numpy()))
        return frames

    def _surface(self, tones: list[Gaussians], viewmats: np.ndarray, Ks: np.ndarray) -> _Surface:
        return _Surface.mix([self._rasterize(g, g.colours, viewmats, Ks) for g in tones])

    def _rasterize(self, g: Gaussians, feats: np.ndarray, viewmats: np.ndarray, Ks: np.ndarray):
        """Premultiplied features, alpha and expected depth, each ``[C, H, W, ·]``."""
        f32 = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
        with torch.no_grad():
            out = rasterize(
                f32(g.means), f32(g.quats), f32(g.scales), f32(g.opacities), f32(feats),
                f32(viewmats), f32(Ks), self.scene.width, self.scene.height,
            )
        return out.features, out.alpha, out.depth

    def frames(self, viewmats: np.ndarray, Ks: np.ndarray) -> Iterator[list[Frame]]:
        """Every frame t rendered from ``viewmats[:, t]`` (``[C, T, 4, 4]``), in order."""
        for t in range(self.scene.frames):
            yield self.render(t, viewmats[:, t], Ks)
