"""Rendering: ``rasterize`` (any channel count, expected depth, gsplat semantics on every backend)."""

from recon4d.render.projection import Projection, ProjectionSettings, covariance_3d, project_gaussians
from recon4d.render.rasterize import RenderOutput, rasterize

__all__ = ["Projection", "ProjectionSettings", "RenderOutput", "covariance_3d", "project_gaussians", "rasterize"]
