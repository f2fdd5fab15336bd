"""Image quality of a render against its frame.

Here, below the fit, because the fit logs it every step and scores the finished fit with it,
and ``recon4d render`` reports it for the input views: one definition for both numbers.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def psnr(pred: Tensor, target: Tensor) -> Tensor:
    """PSNR in dB (inf for identical images) as a 0-d tensor: a training step logs it without a host sync."""
    return -10.0 * torch.log10(F.mse_loss(pred.clamp(0, 1), target))
