"""Side-by-side preview of a fitted frame: input | render | depth | feature PCA, as one PNG.

The quickest way for a user to see whether a fit worked; written to
``<scene>/preview.png`` at the end of every fit.
"""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
from torch import Tensor

from recon4d.io.atomic import atomic_path
from recon4d.render.colorize import colorize_depth, feature_pca


def write_preview(path: Path, image: Tensor, rgb: Tensor, depth: Tensor, alpha: Tensor, latent: Tensor) -> Path:
    to8 = lambda x: (x.clamp(0, 1).numpy() * 255).astype(np.uint8)  # noqa: E731
    row = np.concatenate([to8(image), to8(rgb), colorize_depth(depth, alpha), feature_pca(latent)], axis=1)
    with atomic_path(path) as tmp:
        cv2.imwrite(str(tmp), cv2.cvtColor(row, cv2.COLOR_RGB2BGR))
    return Path(path)
