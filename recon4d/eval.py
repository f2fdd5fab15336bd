"""Compare a fitted scene with the ground truth of the ``recon4d synth`` scene it came from.

Metrics (written to ``<scene>/metrics.json``):
  psnr_train         mean PSNR of the input-camera renders against the input frames
  psnr_novel         mean PSNR from the held-out novel camera (gt/novel) against its frames, on the
                     pixels some input frame also sees (``covisible``); ``psnr_novel_full`` on all
  traj_err_rel       object motion error: the fitted dynamic Gaussians of each object vs the
                     same points moved by the object's true rigid motion, mean distance over
                     frames, divided by the scene extent (bounding-box diagonal of what the
                     first GT frame sees); ``traj_err_m`` is the same in metres
  direction_correct  every object's recovered motion direction (dominant left/right or
                     toward/away component in the first camera, or spin sense about the
                     vertical for objects that stay in place) matches the ground truth
  feat_cos           mean cosine similarity of decoded features and teacher tokens
                     on the training views (per teacher, and the mean)

The fitted world is aligned to the ground-truth world by a similarity transform
(Umeyama) between static points lifted from the fitted and true depth of frame 0.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import Tensor

from recon4d.geometry import kabsch, lift, quat_mul, quat_to_rotmat, rotmat_to_quat, umeyama
from recon4d.io.atomic import write_json
from recon4d.render import rasterize
from recon4d.scene.data import load_scene_data
from recon4d.scene.heads import to_grid
from recon4d.scene.model import LATENT_START, RGB
from recon4d.scene.state import load_scene
from recon4d.scene_folder import MissingStageError, SceneFolder


@dataclass
class Similarity:
    scale: float
    rot: Tensor  # [3,3]
    trans: Tensor  # [3]

    def points(self, x: Tensor) -> Tensor:
        return self.scale * x @ self.rot.T + self.trans


def similarity_from(src: Tensor, dst: Tensor) -> Similarity:
    """Umeyama fit (shared with the priors report) as a Similarity on tensors."""
    scale, rot, trans = umeyama(src.double().numpy(), dst.double().numpy())
    return Similarity(scale, torch.from_numpy(rot).float(), torch.from_numpy(trans).float())


def _read_ids(folder: Path) -> np.ndarray:
    return np.stack([np.array(Image.open(p)) for p in sorted(folder.glob("*.png"))])


def _read_images(folder: Path) -> Tensor:
    return torch.from_numpy(np.stack([np.array(Image.open(p).convert("RGB"))
                                      for p in sorted(folder.glob("*.jpg"))])).float() / 255


def _psnr(a: Tensor, b: Tensor) -> float:
    return float(-10 * torch.log10(F.mse_loss(a.clamp(0, 1), b)))


def _yaw(rot: Tensor) -> float:
    """Rotation angle about world z (up) of a rotation matrix."""
    return math.atan2(float(rot[1, 0]), float(rot[0, 0]))


def _turned(rots) -> float:
    """Yaw turned over a clip, summed frame step by frame step. Why not the yaw of the net rotation:
    after half a turn or more, the net rotation no longer tells clockwise from counter-clockwise."""
    return sum(_yaw(b @ a.T) for a, b in zip(rots, rots[1:]))


@torch.no_grad()
def evaluate_scene(scene_dir: Path, gt_dir: Path | None = None) -> dict:
    scene_dir = Path(scene_dir)
    folder = SceneFolder(scene_dir)
    if not folder.has_fit():
        raise MissingStageError(f"{scene_dir}/model is missing; run `recon4d fit` on this scene first")
    data = load_scene_data(scene_dir)
    scene, heads, meta = load_scene(folder.model)
    if gt_dir is None:
        gt_dir = Path(folder.frames_info().get("source", ""))
    gt_dir = Path(gt_dir)
    if not (gt_dir / "gt").is_dir():
        raise MissingStageError(f"{gt_dir} has no gt/ folder; pass --gt <recon4d synth scene folder>")

    T = data.frames
    renders = [rasterize(*scene.at(t).as_args(), data.viewmats[t:t + 1], data.K[None], data.width, data.height)
               for t in range(T)]
    metrics: dict = {"psnr_train": float(np.mean([_psnr(r.features[0, ..., RGB], data.images[t])
                                                   for t, r in enumerate(renders)]))}

    # Similarity from the fitted world to the GT world, on static pixels of frame 0.
    gt_cam = np.load(gt_dir / "gt" / "cameras.npz")
    gt_K, gt_view = torch.from_numpy(gt_cam["K"]).float(), torch.from_numpy(gt_cam["viewmats"]).float()
    gt_depth = torch.from_numpy(np.load(gt_dir / "gt" / "depth.npz")["depth"]).float()
    ids = torch.from_numpy(_read_ids(gt_dir / "Annotations").astype(np.int64))
    fit_depth = renders[0].depth[0, ..., 0]
    ok = (ids[0] == 0) & (gt_depth[0] > 0) & (renders[0].alpha[0, ..., 0] > 0.9)
    ys, xs = torch.nonzero(ok, as_tuple=True)
    uv = torch.stack([xs, ys], 1).float() + 0.5  # pixel centres
    gt_pts = lift(uv, gt_depth[0, ys, xs], gt_K, gt_view[0])
    sim = similarity_from(lift(uv, fit_depth[ys, xs], data.K, data.viewmats[0]), gt_pts)
    extent = float((gt_pts.max(0).values - gt_pts.min(0).values).norm())
    metrics["alignment_scale"] = sim.scale
    metrics["scene_extent_m"] = extent

    metrics.update(_novel_psnr(scene, sim, gt_dir, gt_K, gt_view, gt_depth))
    traj, direction = _trajectories(scene, data, sim, gt_dir, ids, gt_view, extent)
    metrics.update(traj)
    metrics["direction_correct"] = direction
    if heads:
        metrics.update(_feature_cosine(renders, heads, data))
    path = SceneFolder(scene_dir).metrics  # beside the fit's own numbers (time, memory, per frame), not over them
    write_json(path, {**(json.loads(path.read_text()) if path.exists() else {}), **metrics})
    return metrics


def _aligned_gaussians(scene, t: int, sim: Similarity):
    g = scene.at(t)
    q_sim = rotmat_to_quat(sim.rot)
    quats = quat_mul(q_sim.expand_as(g.quats), F.normalize(g.quats, dim=-1))
    return sim.points(g.means), quats, g.scales * sim.scale, g.opacities, g.features


def covisible(depth: Tensor, K: Tensor, view: Tensor, in_K: Tensor, in_views: Tensor, in_depth: Tensor) -> Tensor:
    """Pixels of a novel view whose true surface point some input view also sees (depth test, 5%).

    Novel-view PSNR is scored on these pixels only (the "masked PSNR" of dynamic-scene
    benchmarks): what no input frame saw cannot be reconstructed, only hallucinated.
    """
    H, W = depth.shape
    ys, xs = torch.nonzero(depth > 0, as_tuple=True)
    world = lift(torch.stack([xs, ys], 1).float() + 0.5, depth[ys, xs], K, view)
    seen = torch.zeros(len(world), dtype=torch.bool)
    h, w = in_depth.shape[1:]
    for t in range(len(in_views)):
        cam = world @ in_views[t, :3, :3].T + in_views[t, :3, 3]
        uv = (cam @ in_K.T)[:, :2] / cam[:, 2:3].clamp(min=1e-6)
        px = torch.floor(uv).long()
        inside = (cam[:, 2] > 0) & (px[:, 0] >= 0) & (px[:, 0] < w) & (px[:, 1] >= 0) & (px[:, 1] < h)
        d = in_depth[t, px[inside, 1], px[inside, 0]]
        hit = torch.zeros_like(seen)
        hit[inside] = (d - cam[inside, 2]).abs() < 0.05 * cam[inside, 2]
        seen |= hit
    mask = torch.zeros(H, W, dtype=torch.bool)
    mask[ys[seen], xs[seen]] = True
    return mask


def _novel_psnr(scene, sim: Similarity, gt_dir: Path, in_K: Tensor, in_views: Tensor, in_depth: Tensor) -> dict:
    novel = gt_dir / "gt" / "novel"
    if not (novel / "cameras.npz").exists():
        return {"psnr_novel": None}
    cams = np.load(novel / "cameras.npz")
    K, views = torch.from_numpy(cams["K"]).float(), torch.from_numpy(cams["viewmats"]).float()
    depth = torch.from_numpy(np.load(novel / "depth.npz")["depth"]).float()
    images = _read_images(novel / "JPEGImages")
    H, W = images.shape[1:3]
    masked, full, coverage = [], [], []
    for t in range(len(views)):
        out = rasterize(*_aligned_gaussians(scene, t, sim), views[t:t + 1], K[None], W, H)
        pred = out.features[0, ..., RGB]
        mask = covisible(depth[t], K, views[t], in_K, in_views, in_depth)
        masked.append(float(-10 * torch.log10(F.mse_loss(pred.clamp(0, 1)[mask], images[t][mask]))))
        full.append(_psnr(pred, images[t]))
        coverage.append(float(mask.float().mean()))
    return {"psnr_novel": float(np.mean(masked)), "psnr_novel_full": float(np.mean(full)),
            "novel_covisible_fraction": float(np.mean(coverage))}


def _trajectories(scene, data, sim: Similarity, gt_dir: Path, ids: Tensor, gt_view: Tensor, extent: float):
    objs = np.load(gt_dir / "gt" / "objects.npz")
    ref = scene.reference_frame
    n_static, T = len(scene.static), data.frames
    # Which object each dynamic Gaussian belongs to: its projection into the reference frame's GT mask.
    means_ref = scene.at(ref).means[n_static:]
    cam = means_ref @ data.viewmats[ref, :3, :3].T + data.viewmats[ref, :3, 3]
    uv = (cam @ data.K.T)[:, :2] / cam[:, 2:3].clamp(min=1e-6)
    px = uv.long()
    x, y = px[:, 0].clamp(0, data.width - 1), px[:, 1].clamp(0, data.height - 1)
    owner = ids[ref, y, x]
    fitted = torch.stack([sim.points(scene.at(t).means[n_static:]) for t in range(T)])  # [T,Nd,3]
    cam0_rot = gt_view[0, :3, :3]
    errors, correct, per_object = [], True, {}
    for k, oid in enumerate(objs["ids"].tolist()):
        sel = owner == oid
        if sel.sum() < 3:
            correct = False
            per_object[str(oid)] = {"error": "no fitted Gaussians on this object"}
            continue
        centres = torch.from_numpy(objs["centres"][k]).float()
        rots = quat_to_rotmat(torch.from_numpy(objs["quats"][k]).float())
        p_ref = fitted[ref, sel]
        truth = torch.stack([(p_ref - centres[ref]) @ (rots[t] @ rots[ref].T).T + centres[t] for t in range(T)])
        err = (fitted[:, sel] - truth).norm(dim=-1).mean(1)  # [T]
        errors.append(err.mean())
        fit_disp = cam0_rot @ (fitted[-1, sel].mean(0) - fitted[0, sel].mean(0))
        gt_disp = cam0_rot @ (centres[-1] - centres[0])
        ones = torch.ones(int(sel.sum()))
        fit_yaw = _turned([kabsch(fitted[0, sel], fitted[t, sel], ones)[0] for t in range(T)])
        gt_yaw = _turned(rots)
        if float(gt_disp.norm()) > 0.05 * extent:
            axis = int(torch.argmax(gt_disp[[0, 2]].abs()))
            axis = [0, 2][axis]
            ok = bool(torch.sign(fit_disp[axis]) == torch.sign(gt_disp[axis]))
        elif abs(gt_yaw) > math.radians(15):
            ok = math.copysign(1, fit_yaw) == math.copysign(1, gt_yaw)
        else:
            ok = float(fit_disp.norm()) < 0.05 * extent
        correct &= ok
        per_object[str(oid)] = {"traj_err_m": float(err.mean()), "direction_correct": ok,
                                "gt_displacement_cam0": gt_disp.tolist(), "fit_displacement_cam0": fit_disp.tolist(),
                                "gt_yaw_deg": math.degrees(gt_yaw), "fit_yaw_deg": math.degrees(fit_yaw)}
    mean_err = float(torch.stack(errors).mean()) if errors else float("nan")
    return {"traj_err_m": mean_err, "traj_err_rel": mean_err / extent, "objects": per_object}, bool(correct)


def _feature_cosine(renders, heads, data) -> dict:
    """Decoded features of the input-camera renders vs the teachers' tokens."""
    result = {}
    for name, teacher in data.teachers.items():
        cos = []
        for t, out in enumerate(renders):
            latent = out.features[0, ..., LATENT_START:]
            pred = heads[name](to_grid(latent, teacher.shape[1], teacher.shape[2]))
            cos.append(F.cosine_similarity(pred, teacher[t], dim=-1).mean())
        result[f"feat_cos_{name}"] = float(torch.stack(cos).mean())
    result["feat_cos"] = float(np.mean(list(result.values())))
    return result
