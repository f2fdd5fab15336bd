"""Render a synthetic scene with the project's rasterizer: RGB, object masks and depth.

Masks are not drawn separately: each object's Gaussians carry a one-hot channel
next to their RGB, and the same ``rasterize`` call composites both, so a pixel's
mask id always agrees with the colour it shows (occlusion included). The depth
is the rasterizer's expected depth, i.e. exactly what a fitted scene would render.

The static background is drawn first, one call per tone of each surface (see
``assets.background``: coplanar discs would otherwise swap their order with the
view), the tones of a surface mixed by coverage; then the objects over it. Layers
are composited front over back, which is what one call gives when the later
Gaussians all sort in front; nothing in the background can occlude an object:
the ground lies under them and the backdrop behind them.
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
class _Layer:
    """Composited premultiplied features, accumulated depth (z times alpha) and alpha, each ``[C, H, W, ·]``."""

    features: torch.Tensor
    z: torch.Tensor
    alpha: torch.Tensor

    def over(self, back: _Layer) -> _Layer:
        """This layer composited in front of ``back``."""
        t = 1.0 - self.alpha
        return _Layer(self.features + t * back.features, self.z + t * back.z, self.alpha + t * back.alpha)

    @staticmethod
    def mix(tones: list[_Layer]) -> _Layer:
        """Coplanar layers mixed by coverage: none is in front of another, so their colours and depths are
        averaged with their alphas as weights, under the alpha all of them accumulate together."""
        alpha = 1.0 - torch.prod(torch.stack([1.0 - t.alpha for t in tones]), 0)
        scale = alpha / sum(t.alpha for t in tones).clamp(min=1e-10)
        return _Layer(scale * sum(t.features for t in tones), scale * sum(t.z for t in tones), alpha)


class SceneRenderer:
    """Holds a scene's Gaussians and renders any frame from any set of cameras."""

    def __init__(self, scene: Scene, detail: float):
        self.scene = scene
        self.static = background(detail)  # surfaces back to front, each a list of tones
        self.assets = [object_gaussians(o.shape, COLOURS[o.colour], detail) for o in scene.objects]

    @property
    def num_gaussians(self) -> int:
        return sum(len(g) for tones in self.static for g in tones) + sum(len(a) for a in self.assets)

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
        layers = [self._surface(tones, viewmats, Ks) for tones in self.static]
        if k:
            layers.append(self._rasterize(*self.objects_at(frame), viewmats, Ks))
        acc = layers[0]
        for layer in layers[1:]:
            acc = layer.over(acc)
        bg = torch.zeros(3 + k)
        bg[:3] = torch.tensor(SKY)
        features = acc.features + (1.0 - acc.alpha) * bg
        depth = acc.z / acc.alpha.clamp(min=1e-10)
        frames = []
        for c in range(viewmats.shape[0]):
            f = features[c].numpy()
            rgb = np.clip(np.round(f[..., :3] * 255.0), 0, 255).astype(np.uint8)
            ids = np.zeros(f.shape[:2], np.uint8)
            if k:
                best = f[..., 3:].argmax(-1)
                ids = np.where(f[..., 3:].max(-1) > MASK_THRESHOLD, best + 1, 0).astype(np.uint8)
            frames.append(Frame(rgb, ids, depth[c, ..., 0].numpy(), acc.alpha[c, ..., 0].numpy()))
        return frames

    def _surface(self, tones: list[Gaussians], viewmats: np.ndarray, Ks: np.ndarray) -> _Layer:
        """One background surface: a call per tone, no object channel lit, the tones mixed by coverage."""
        k = len(self.assets)
        blank = lambda g: np.concatenate([g.colours, np.zeros((len(g), k))], -1)  # noqa: E731
        return _Layer.mix([self._rasterize(g, blank(g), viewmats, Ks) for g in tones])

    def _rasterize(self, g: Gaussians, feats: np.ndarray, viewmats: np.ndarray, Ks: np.ndarray) -> _Layer:
        f32 = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
        with torch.no_grad():
            out = rasterize(
                f32(g.means), f32(g.quats), f32(g.scales), f32(g.opacities), f32(feats),
                f32(viewmats), f32(Ks), self.scene.width, self.scene.height,
            )
        return _Layer(out.features, out.depth * out.alpha, out.alpha)

    def frames(self, viewmats: np.ndarray, Ks: np.ndarray) -> Iterator[list[Frame]]:
        """Every frame t rendered from ``viewmats[:, t]`` (``[C, T, 4, 4]``), in order."""
        for t in range(self.scene.frames):
            yield self.render(t, viewmats[:, t], Ks)
