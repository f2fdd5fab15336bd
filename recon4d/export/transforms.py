"""nerfstudio ``transforms.json``: the solved cameras and frame paths, for other tools.

nerfstudio stores camera-to-world matrices in the OpenGL/Blender convention (x right,
y up, z backward); ours are world-to-camera in OpenCV (x right, y down, z forward).
The two differ by inverting the matrix and flipping the camera's y and z axes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from torch import Tensor

from recon4d.io.atomic import write_json

CV_TO_GL = torch.diag(torch.tensor([1.0, -1.0, -1.0, 1.0]))  # flips camera y and z (self-inverse)


def opencv_w2c_to_opengl_c2w(viewmats: Tensor) -> Tensor:
    return torch.linalg.inv(viewmats.double()) @ CV_TO_GL.double()


def opengl_c2w_to_opencv_w2c(c2w: Tensor) -> Tensor:
    return torch.linalg.inv(c2w.double() @ CV_TO_GL.double())


def write_transforms(path: Path, K: Tensor, viewmats: Tensor, width: int, height: int,
                     frame_files: list[Path], ply_file: Path | None = None) -> Path:
    """Write ``transforms.json`` at ``path``; frame and PLY paths are stored relative to it."""
    path = Path(path)
    rel = lambda p: os.path.relpath(Path(p).resolve(), path.parent.resolve())  # noqa: E731
    c2w = opencv_w2c_to_opengl_c2w(viewmats)
    T = len(frame_files)
    doc = {
        "camera_model": "OPENCV",
        "fl_x": float(K[0, 0]), "fl_y": float(K[1, 1]), "cx": float(K[0, 2]), "cy": float(K[1, 2]),
        "w": int(width), "h": int(height), "k1": 0.0, "k2": 0.0, "p1": 0.0, "p2": 0.0,
        "frames": [{"file_path": rel(f), "transform_matrix": c2w[i].tolist(), "time": i / max(T - 1, 1)}
                   for i, f in enumerate(frame_files)],
    }
    if ply_file is not None:
        doc["ply_file_path"] = rel(ply_file)
    return write_json(path, doc)


def read_transforms(path: Path) -> tuple[Tensor, Tensor, list[Path]]:
    """(K [3,3], viewmats [T,4,4] OpenCV world-to-camera, absolute frame paths) from a transforms.json."""
    path = Path(path)
    doc = json.loads(path.read_text())
    K = torch.tensor([[doc["fl_x"], 0.0, doc["cx"]], [0.0, doc["fl_y"], doc["cy"]], [0.0, 0.0, 1.0]])
    c2w = torch.tensor([f["transform_matrix"] for f in doc["frames"]], dtype=torch.float64)
    files = [(path.parent / f["file_path"]).resolve() for f in doc["frames"]]
    return K, opengl_c2w_to_opencv_w2c(c2w).float(), files
