"""What the viewer draws, as plain numpy arrays: splat covariances and colours per mode, scaffold lines.

Kept apart from the viser wiring so it can be tested and reasoned about without a
browser. Colour modes are per-Gaussian so viser's own splat renderer shows them:
the feature PCA is linear, so splats coloured by the PCA of their latents render the
PCA of the rendered latent map (up to the final clamp); depth colours each Gaussian
by its depth in the frame's input camera.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
from torch import Tensor

from recon4d.export.ply import Splats
from recon4d.geometry import quat_to_rotmat

MODES = ("rgb", "depth", "feature pca")


def covariances(splats: Splats) -> np.ndarray:
    """World covariances [N,3,3] = R S S^T R^T of activated splats."""
    R = quat_to_rotmat(torch.nn.functional.normalize(splats.quats, dim=-1))
    M = R * splats.scales[:, None, :]
    return (M @ M.transpose(1, 2)).numpy().astype(np.float32)


class PcaColours:
    """One 3-component PCA basis of all latents, fixed for the session (colours do not flicker with time)."""

    def __init__(self, latents: Tensor):
        self.mean = latents.mean(0) if len(latents) else torch.zeros(latents.shape[1])
        L = latents.shape[1]
        if L == 0 or len(latents) < 2:
            self.basis = torch.zeros(L, 3)
            self.lo, self.hi = torch.zeros(3), torch.ones(3)
            return
        _, _, v = torch.pca_lowrank(latents - self.mean, q=min(3, L), center=False)
        self.basis = torch.cat([v, torch.zeros(L, 3 - v.shape[1])], 1)
        proj = (latents - self.mean) @ self.basis
        self.lo, self.hi = proj.quantile(0.01, 0), proj.quantile(0.99, 0)

    def __call__(self, latents: Tensor) -> np.ndarray:
        proj = ((latents - self.mean) @ self.basis - self.lo) / (self.hi - self.lo).clamp(min=1e-8)
        return proj.clamp(0, 1).numpy().astype(np.float32)


def depth_colours(means: Tensor, viewmat: Tensor) -> np.ndarray:
    """Inverse camera depth of each Gaussian through the turbo map (near = red), in [0,1] RGB."""
    z = (means @ viewmat[:3, :3].T + viewmat[:3, 3])[:, 2].clamp(min=1e-6)
    inv = 1.0 / z
    lo, hi = inv.quantile(0.02), inv.quantile(0.98)
    norm = ((inv - lo) / (hi - lo).clamp(min=1e-8)).clamp(0, 1)
    lut = cv2.applyColorMap(np.arange(256, dtype=np.uint8)[:, None], cv2.COLORMAP_TURBO)[:, 0, ::-1]
    return (lut[(norm.numpy() * 255).astype(np.int64)] / 255.0).astype(np.float32)


def colours(splats: Splats, mode: str, viewmat: Tensor, pca: PcaColours) -> np.ndarray:
    if mode == "rgb":
        return splats.colors.clamp(0, 1).numpy().astype(np.float32)
    if mode == "depth":
        return depth_colours(splats.means, viewmat)
    if mode == "feature pca":
        return pca(splats.latents)
    raise ValueError(f"unknown colour mode {mode!r}; choose one of {', '.join(MODES)}")


def trajectory_segments(paths: Tensor, max_nodes: int = 512) -> np.ndarray:
    """Line segments [S,2,3] along node paths [T,M,3] (an even subsample of at most max_nodes nodes)."""
    T, M, _ = paths.shape
    keep = torch.linspace(0, M - 1, min(M, max_nodes)).round().long().unique()
    p = paths[:, keep]
    return torch.stack([p[:-1], p[1:]], 2).reshape(-1, 2, 3).numpy().astype(np.float32)
