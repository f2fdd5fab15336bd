"""Exact priors from a synthetic scene's ground truth, in the scene-folder format the fit reads.

Why: to test and ablate the optimiser apart from preprocessing errors. Given a
``recon4d synth`` folder, this writes ``frames/`` and ``priors/`` (camera, depth,
dynamic masks, point tracks) computed from the ground truth: tracks are surface
points moved with their object's true rigid motion and projected with the true
camera, visible where the true depth map agrees.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from PIL import Image

from recon4d.geometry import lift_np, quat_to_rotmat_np
from recon4d.io.atomic import atomic_path, write_json




def _project(points: np.ndarray, K: np.ndarray, viewmat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cam = points @ viewmat[:3, :3].T + viewmat[:3, 3]
    uv = cam @ K.T
    return uv[:, :2] / uv[:, 2:3], cam[:, 2]


def gt_tracks(depth: np.ndarray, ids: np.ndarray, K: np.ndarray, viewmats: np.ndarray,
              objects: dict[int, tuple[np.ndarray, np.ndarray]], ref: int, stride: int) -> dict[str, np.ndarray]:
    """Tracks seeded on a pixel grid at frame ``ref``; objects move rigidly, the background not at all."""
    T, H, W = depth.shape
    grid = np.zeros((H, W), bool)
    grid[stride // 2::stride, stride // 2::stride] = True
    grid |= ids[ref] > 0  # objects are small: seed every object pixel
    ys, xs = np.nonzero(grid)
    keep = depth[ref, ys, xs] > 0
    ys, xs = ys[keep], xs[keep]
    owner = ids[ref, ys, xs]
    world_ref = lift_np(np.stack([xs + 0.5, ys + 0.5], 1), depth[ref, ys, xs], K, viewmats[ref])
    xy = np.zeros((T, len(xs), 2), np.float32)
    visible = np.zeros((T, len(xs)), bool)
    for t in range(T):
        world_t = world_ref.copy()
        for oid, (centres, quats) in objects.items():
            sel = owner == oid
            rel = quat_to_rotmat_np(quats[t]) @ quat_to_rotmat_np(quats[ref]).T
            world_t[sel] = (world_ref[sel] - centres[ref]) @ rel.T + centres[t]
        uv, z = _project(world_t, K, viewmats[t])
        px = np.floor(uv).astype(int)
        inside = (px[:, 0] >= 0) & (px[:, 0] < W) & (px[:, 1] >= 0) & (px[:, 1] < H) & (z > 0)
        seen = np.zeros(len(xs), bool)
        d = depth[t, px[inside, 1], px[inside, 0]]
        seen[inside] = np.abs(d - z[inside]) < 0.05 * z[inside]
        xy[t], visible[t] = uv, seen  # image coordinates: pixel i spans [i, i+1), as the rasterizer
    return {"xy": xy, "visible": visible, "dynamic": owner > 0}


def write_gt_priors(synth_dir: Path, scene_dir: Path, track_stride: int = 4) -> Path:
    """Write ``frames/`` and ``priors/`` of ``scene_dir`` from the ground truth in ``synth_dir``."""
    synth_dir, scene_dir = Path(synth_dir), Path(scene_dir)
    cams = np.load(synth_dir / "gt" / "cameras.npz")
    K, viewmats = cams["K"], cams["viewmats"]
    depth = np.load(synth_dir / "gt" / "depth.npz")["depth"]
    jpgs = sorted((synth_dir / "JPEGImages").glob("*.jpg"))
    ids = np.stack([np.array(Image.open(p)) for p in sorted((synth_dir / "Annotations").glob("*.png"))])
    objs = np.load(synth_dir / "gt" / "objects.npz")
    objects = {int(i): (objs["centres"][k], objs["quats"][k]) for k, i in enumerate(objs["ids"])}
    T, H, W = depth.shape
    frames = scene_dir / "frames"
    frames.mkdir(parents=True, exist_ok=True)
    for i, src in enumerate(jpgs):
        with atomic_path(frames / f"{i:05d}.jpg") as tmp:
            shutil.copyfile(src, tmp)
    fps = json.loads((synth_dir / "gt" / "cameras.json").read_text()).get("fps", 12)
    write_json(scene_dir / "frames.json", {"fps": fps, "width": W, "height": H, "source": str(synth_dir),
                                        "indices": list(range(T))})
    priors = scene_dir / "priors"
    write_json(priors / "camera.json", {"K": K.tolist(), "viewmats": viewmats.tolist(), "width": W,
                                        "height": H, "motion_type": "ground-truth", "provider": "gt",
                                        "world_up": [0.0, 0.0, 1.0]})  # synth worlds are z-up
    for name, arrays in {
        "depth": {"depth": depth.astype(np.float32)},
        "masks": {"dynamic": ids > 0},
        "tracks": gt_tracks(depth, ids, K, viewmats, objects, ref=T // 2, stride=track_stride),
    }.items():
        with atomic_path(priors / f"{name}.npz") as tmp:
            np.savez(tmp, **arrays)
    return scene_dir
