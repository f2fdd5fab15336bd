"""The 4D scene: static Gaussians, dynamic Gaussians skinned to a motion scaffold, and latents."""

from recon4d.scene.gaussians import GaussianSet
from recon4d.scene.model import DynamicScene, FrameGaussians
from recon4d.scene.scaffold import MotionScaffold

__all__ = ["DynamicScene", "FrameGaussians", "GaussianSet", "MotionScaffold"]
