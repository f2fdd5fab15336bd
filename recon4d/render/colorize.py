"""Rendered maps as pictures: depth through a colour map, a feature field through its first principal components.

Shared by the fit's preview (:mod:`recon4d.fit.preview`) and ``recon4d render``'s videos.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
from torch import Tensor


def colorize_depth(depth: Tensor, alpha: Tensor) -> np.ndarray:
    """Inverse depth, normalised over covered pixels, through the turbo colour map -> uint8 RGB."""
    inv = torch.where(alpha > 0.5, 1.0 / depth.clamp(min=1e-6), torch.zeros_like(depth))
    valid = inv[alpha > 0.5]
    lo, hi = (valid.min(), valid.max()) if valid.numel() else (0.0, 1.0)
    norm = ((inv - lo) / max(float(hi - lo), 1e-8)).clamp(0, 1)
    bgr = cv2.applyColorMap((norm.numpy() * 255).astype(np.uint8), cv2.COLORMAP_TURBO)
    return cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)


def feature_pca(latent: Tensor) -> np.ndarray:
    """First three principal components of a [H,W,L] map, each scaled to [0,255] -> uint8 RGB."""
    H, W, L = latent.shape
    if L == 0:
        return _no_features(H, W)
    flat = latent.reshape(-1, L)
    flat = flat - flat.mean(0)
    _, _, v = torch.pca_lowrank(flat, q=min(3, L), center=False)
    proj = flat @ v
    proj = (proj - proj.min(0).values) / (proj.max(0).values - proj.min(0).values).clamp(min=1e-8)
    if proj.shape[1] < 3:
        proj = torch.cat([proj, torch.zeros(len(proj), 3 - proj.shape[1])], 1)
    return (proj.reshape(H, W, 3).numpy() * 255).astype(np.uint8)


def _no_features(H: int, W: int) -> np.ndarray:
    """The feature panel of a fit without teachers: says so, rather than a black square that looks broken."""
    panel = np.zeros((H, W, 3), np.uint8)
    scale = max(W / 480, 0.3)
    for i, line in enumerate(("no feature field:", "fit with --teacher NAME")):
        cv2.putText(panel, line, (int(10 * scale), int((30 + 28 * i) * scale)), cv2.FONT_HERSHEY_SIMPLEX,
                    0.6 * scale, (200, 200, 200), max(1, round(scale)), cv2.LINE_AA)
    return panel
