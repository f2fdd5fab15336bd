"""Dense optical flow between consecutive frames.

Why DIS by default: OpenCV's DIS flow needs no weights, runs on CPU at video
rate for 480x270, and is accurate to a fraction of a pixel on textured regions,
which is what flow-chained tracks and the motion mask need. A learned flow
(RAFT) would plug in behind the same ``FlowProvider.compute``.

Flow is in pixels, ``flow[t, y, x] = (dx, dy)`` maps frame t to frame t+1;
``backward[t]`` maps frame t+1 back to frame t.
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np
from tqdm import tqdm


@dataclass(frozen=True)
class DISFlow:
    """OpenCV DIS optical flow (offline, CPU)."""

    preset: str = "medium"  # ultrafast | fast | medium
    finest_scale: int = 0  # 0: refine at full resolution (the presets stop at 1/2, which biases small flows)
    patch_size: int = 8
    patch_stride: int = 2
    name: str = "dis"

    def compute(self, frames: np.ndarray, progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Forward and backward flow ``[T-1, H, W, 2]`` float32 for RGB frames ``[T, H, W, 3]``."""
        presets = {"ultrafast": cv2.DISOPTICAL_FLOW_PRESET_ULTRAFAST, "fast": cv2.DISOPTICAL_FLOW_PRESET_FAST,
                   "medium": cv2.DISOPTICAL_FLOW_PRESET_MEDIUM}
        dis = cv2.DISOpticalFlow_create(presets[self.preset])
        dis.setFinestScale(self.finest_scale)
        dis.setPatchSize(self.patch_size)
        dis.setPatchStride(self.patch_stride)
        gray = [cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames]
        T, H, W = len(frames), *frames.shape[1:3]
        fwd = np.empty((T - 1, H, W, 2), np.float32)
        bwd = np.empty_like(fwd)
        for t in tqdm(range(T - 1), desc="flow (DIS)", unit="pair", disable=not progress, leave=False):
            fwd[t] = dis.calc(gray[t], gray[t + 1], None)
            bwd[t] = dis.calc(gray[t + 1], gray[t], None)
        return fwd, bwd


def sample(field: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """Bilinear sample of ``field [H, W, C]`` at pixel positions ``xy [N, 2]`` (pixel centres at +0.5)."""
    H, W = field.shape[:2]
    x = np.clip(xy[:, 0] - 0.5, 0, W - 1)
    y = np.clip(xy[:, 1] - 0.5, 0, H - 1)
    x0 = np.minimum(np.floor(x).astype(int), W - 2)
    y0 = np.minimum(np.floor(y).astype(int), H - 2)
    fx, fy = (x - x0)[:, None], (y - y0)[:, None]
    # no copy of a float32 field (the flows, sampled thousands of times over), and one flat index for the
    # four corners: the same values as field[y0, x0] etc., in half the time
    f = np.asarray(field, dtype=np.float32).reshape(H * W, -1)
    i = y0 * W + x0
    return ((1 - fx) * (1 - fy) * f[i] + fx * (1 - fy) * f[i + 1]
            + (1 - fx) * fy * f[i + W] + fx * fy * f[i + W + 1])
