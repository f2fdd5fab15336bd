"""Standard files other tools read: 3DGS PLY splats and nerfstudio ``transforms.json``."""
