"""Render a synthetic scene with the project's rasterizer: RGB, object masks and depth.

Masks are not drawn separately: each object's Gaussians carry a one-hot channel
next to their RGB, and the same ``rasterize`` call composites both, so a pixel's
mask id always agrees with the colour it shows (occlusion included). The depth
is the rasterizer's expected depth, i.e. exactly what a fitted scene would render.
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


class SceneRenderer:
    """Holds a scene's Gaussians and renders any frame from any set of cameras."""

    def __init__(self, scene: Scene, detail: float):
        self.scene = scene
        self.static = background(detail)
        self.assets = [object_gaussians(o.shape, COLOURS[o.colour], detail) for o in scene.objects]

    @property
    def num_gaussians(self) -> int:
        return len(self.static) + sum(len(a) for a in self.assets)

    def gaussians_at(self, frame: int) -> tuple[Gaussians, np.ndarray]:
        """All Gaussians posed at ``frame`` and their features ``[N, 3 + num_objects]``."""
        k = len(self.assets)
        parts, onehots = [self.static], [np.zeros((len(self.static), k))]
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
        g, feats = self.gaussians_at(frame)
        f32 = lambda a: torch.as_tensor(np.ascontiguousarray(a), dtype=torch.float32)  # noqa: E731
        bg = torch.zeros(feats.shape[1])
        bg[:3] = torch.tensor(SKY)
        with torch.no_grad():
            out = rasterize(
                f32(g.means), f32(g.quats), f32(g.scales), f32(g.opacities), f32(feats),
                f32(viewmats), f32(Ks), self.scene.width, self.scene.height, backgrounds=bg,
            )
        frames = []
        for c in range(viewmats.shape[0]):
            f = out.features[c].numpy()
            rgb = np.clip(np.round(f[..., :3] * 255.0), 0, 255).astype(np.uint8)
            ids = np.zeros(f.shape[:2], np.uint8)
            if f.shape[-1] > 3:
                best = f[..., 3:].argmax(-1)
                ids = np.where(f[..., 3:].max(-1) > MASK_THRESHOLD, best + 1, 0).astype(np.uint8)
            frames.append(Frame(rgb, ids, out.depth[c, ..., 0].numpy(), out.alpha[c, ..., 0].numpy()))
        return frames

    def frames(self, viewmats: np.ndarray, Ks: np.ndarray) -> Iterator[list[Frame]]:
        """Every frame t rendered from ``viewmats[:, t]`` (``[C, T, 4, 4]``), in order."""
        for t in range(self.scene.frames):
            yield self.render(t, viewmats[:, t], Ks)
