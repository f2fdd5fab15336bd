"""recon4d: monocular video -> dynamic 3D Gaussian 4D feature field.

Public entry points:
    recon4d.render.rasterize   Gaussian rasterizer (gsplat on CUDA, our C++ kernel on CPU)
    recon4d.cli.main           the ``recon4d`` command
"""

__version__ = "0.1.0"
