"""How good the priors are: ground-truth comparison on synth scenes, a short report on real data.

Why here and not in ``eval``: the camera/track/mask errors are the quality bar of
the preprocessing stage itself, and a later stage's blur is much easier
to diagnose when the priors it started from are known to be right or wrong.

Ground truth comes from a ``recon4d synth`` scene folder (``gt/``, ``synth.json``,
``Annotations/``). Metrics (``report.json``):

- ``rot_err_deg``: angle of R_rel_est^T R_rel_gt over all frame pairs (i < j).
- ``trans_dir_err_deg``: angle between estimated and true camera displacement
  c_j - c_i after a similarity alignment of the camera centres, over the pairs
  whose true baseline is at least 5% of the largest one (None when the camera
  does not translate: the direction is undefined).
- ``focal_err_rel``: |f_est - f_gt| / f_gt.
- ``track_err_px``: distance to the true projection of the seeded surface point,
  over (track, frame) pairs that both the tracker and the ground truth call
  visible; only seeds whose true depth is unambiguous (not on a silhouette).
- ``mask_iou``: IoU of the dynamic mask with the true masks of the moving objects,
  summed over all frames.
Each metric is reported as median / p90 / max where it is a distribution.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from recon4d.geometry import pixel_cells_np, pixels_np, umeyama

if TYPE_CHECKING:
    from recon4d.priors.camera import CameraResult


def is_synth_scene(path: Path) -> bool:
    return (path / "synth.json").exists() and (path / "gt" / "cameras.npz").exists()


class SynthTruth:
    """Ground truth of a synth scene, rescaled to the working resolution and the selected frames."""

    def __init__(self, folder: Path, indices: list[int], width: int, height: int):
        cams = np.load(folder / "gt" / "cameras.npz")
        meta = json.loads((folder / "gt" / "cameras.json").read_text())
        sx, sy = width / meta["width"], height / meta["height"]
        self.K = np.diag([sx, sy, 1.0]) @ cams["K"]
        self.viewmats = cams["viewmats"][indices]
        d = np.load(folder / "gt" / "depth.npz")
        self.depth = np.stack([_resize(d["depth"][i], width, height) for i in indices])
        self.alpha = np.stack([_resize(d["alpha"][i], width, height) for i in indices])
        files = sorted((folder / "Annotations").glob("*.png"))
        self.ids = np.stack([_resize(np.array(Image.open(files[i])), width, height, nearest=True) for i in indices])
        objs = np.load(folder / "gt" / "objects.npz")
        synth = json.loads((folder / "synth.json").read_text())
        motion = {o["id"]: o["motion"] for o in synth["objects"]}
        self.obj_ids = objs["ids"]
        self.centres, self.yaws = objs["centres"][:, indices], objs["yaws"][:, indices]
        self.moving = {int(i): motion[int(i)] != "static" for i in self.obj_ids}

    def dynamic_mask(self) -> np.ndarray:
        """``[T, H, W]`` bool: pixels of objects that move."""
        return np.isin(self.ids, [i for i, m in self.moving.items() if m])

    def tracks(self, xy: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """True positions ``[T, P, 2]``, true visibility ``[T, P]`` and reliable-seed flag ``[P]``."""
        T, P = xy.shape[:2]
        H, W = self.depth.shape[1:]
        p0 = xy[seeds, np.arange(P)]
        px = np.clip(p0 - 0.5, 0, [W - 1, H - 1]).round().astype(int)
        z = np.array([_bilinear(self.depth[s], p[None])[0] for s, p in zip(seeds, p0)])
        oid = self.ids[seeds, px[:, 1], px[:, 0]].astype(int)
        # seeds on a silhouette get a blended depth, no true 3D point to follow: keep seeds where the
        # depth is locally linear (small second difference) and fully opaque
        d = lambda dy, dx: self.depth[seeds, np.clip(px[:, 1] + dy, 0, H - 1), np.clip(px[:, 0] + dx, 0, W - 1)]  # noqa: E731
        zc = d(0, 0)
        curv = np.maximum(np.abs(d(0, -1) + d(0, 1) - 2 * zc), np.abs(d(-1, 0) + d(1, 0) - 2 * zc))
        reliable = (curv < 0.01 * zc) & (self.alpha[seeds, px[:, 1], px[:, 0]] > 0.99)
        ray = np.concatenate([p0, np.ones((P, 1))], 1) @ np.linalg.inv(self.K).T
        cam = ray * z[:, None]
        world = _apply(np.linalg.inv(self.viewmats[seeds]), cam)
        local = world.copy()
        objs = {int(i): k for k, i in enumerate(self.obj_ids)}
        for i, k in objs.items():
            sel = oid == i
            local[sel] = _rotz(-self.yaws[k, seeds[sel]], world[sel] - self.centres[k, seeds[sel]])
        gt = np.zeros((T, P, 2))
        vis = np.zeros((T, P), bool)
        for t in range(T):
            pts = local.copy()
            for i, k in objs.items():
                sel = oid == i
                pts[sel] = _rotz(np.full(sel.sum(), self.yaws[k, t]), local[sel]) + self.centres[k, t]
            c = _apply(self.viewmats[t][None].repeat(P, 0), pts)
            uv = pixels_np(c, self.K)
            q = np.floor(uv).astype(int)
            inside = (c[:, 2] > 0) & (q[:, 0] >= 0) & (q[:, 0] < W) & (q[:, 1] >= 0) & (q[:, 1] < H)
            qc = np.clip(q, 0, [W - 1, H - 1])
            same = (np.abs(self.depth[t, qc[:, 1], qc[:, 0]] - c[:, 2]) < 0.03 * c[:, 2]) & (self.ids[t, qc[:, 1], qc[:, 0]] == oid)
            gt[t], vis[t] = uv, inside & same
        return gt, vis, reliable


def _bilinear(img: np.ndarray, xy: np.ndarray) -> np.ndarray:
    from recon4d.priors.flow import sample

    return sample(img[..., None], xy)[:, 0]


def _resize(a: np.ndarray, w: int, h: int, nearest: bool = False) -> np.ndarray:
    import cv2

    if a.shape[1] == w and a.shape[0] == h:
        return a
    return cv2.resize(a, (w, h), interpolation=cv2.INTER_NEAREST if nearest else cv2.INTER_AREA)


def _apply(mats: np.ndarray, pts: np.ndarray) -> np.ndarray:
    return np.einsum("nij,nj->ni", mats[:, :3, :3], pts) + mats[:, :3, 3]


def _rotz(yaw: np.ndarray, p: np.ndarray) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.stack([c * p[:, 0] - s * p[:, 1], s * p[:, 0] + c * p[:, 1], p[:, 2]], 1)


def _stats(x) -> dict | None:
    x = np.asarray(x, float)
    if x.size == 0:
        return None
    return {"median": float(np.median(x)), "p90": float(np.percentile(x, 90)), "max": float(x.max()),
            "mean": float(x.mean())}


def _angle(R: np.ndarray) -> np.ndarray:
    return np.degrees(np.arccos(np.clip((np.trace(R, axis1=-2, axis2=-1) - 1) / 2, -1, 1)))


def camera_errors(view_est: np.ndarray, view_gt: np.ndarray) -> dict:
    """Relative rotation and translation-direction errors over all frame pairs (see module doc)."""
    T = len(view_gt)
    i, j = np.triu_indices(T, 1)
    Re, Rg = view_est[:, :3, :3], view_gt[:, :3, :3]
    rel_e = Re[j] @ Re[i].transpose(0, 2, 1)
    rel_g = Rg[j] @ Rg[i].transpose(0, 2, 1)
    rot = _angle(rel_e.transpose(0, 2, 1) @ rel_g)
    ce = -np.einsum("tji,tj->ti", Re, view_est[:, :3, 3])
    cg = -np.einsum("tji,tj->ti", Rg, view_gt[:, :3, 3])
    base_g = np.linalg.norm(cg[j] - cg[i], axis=1)
    trans = None
    if base_g.max() > 1e-6:
        s, R, t = umeyama(ce, cg)
        ca = s * ce @ R.T + t
        keep = base_g >= 0.05 * base_g.max()
        de, dg = ca[j] - ca[i], cg[j] - cg[i]
        cos = np.sum(de * dg, 1) / np.maximum(np.linalg.norm(de, axis=1) * base_g, 1e-12)
        trans = _stats(np.degrees(np.arccos(np.clip(cos, -1, 1)))[keep])
    return {"rot_err_deg": _stats(rot), "trans_dir_err_deg": trans}



def track_errors(truth: SynthTruth, xy: np.ndarray, vis: np.ndarray, seeds: np.ndarray) -> dict:
    gt, gvis, reliable = truth.tracks(xy, seeds)
    both = vis & gvis & reliable[None]
    err = np.linalg.norm(xy - gt, axis=-1)[both]
    out = _stats(err) or {}
    out.update(observations=int(both.sum()), reliable_tracks=int(reliable.sum()), tracks=int(len(seeds)),
               tracker_visible_but_hidden=float((vis & ~gvis & reliable[None]).sum() / max(1, (vis & reliable[None]).sum())))
    return out


def mask_iou(truth: SynthTruth, dynamic: np.ndarray) -> dict:
    gt = truth.dynamic_mask()
    inter, union = (gt & dynamic).sum(), (gt | dynamic).sum()
    per = [(g & d).sum() / max(1, (g | d).sum()) for g, d in zip(gt, dynamic) if g.any() or d.any()]
    return {"iou": float(inter / union) if union else 1.0, "per_frame": _stats(per),
            "precision": float(inter / max(1, dynamic.sum())), "recall": float(inter / max(1, gt.sum()))}


def summary(r: dict, scene: Path) -> str:
    """The short report: frames, tracks kept, camera motion, time per step, and GT metrics when present."""
    steps = ", ".join(f"{k} {v:.1f}s" for k, v in r["time_s"].items())
    lines = [f"{scene}: {r['frames']} frames {r['width']}x{r['height']}, {r['tracks_kept']} tracks kept "
             f"({r['tracks_static_ba']} static in BA), camera {r['motion_type']}, FoV {r['fov_deg']:.1f} deg, "
             f"depth {r['depth_provider']}", f"priors time: {steps}"]
    if "user_mask_tracks" in r:
        m = r["user_mask_tracks"]
        lines.append(f"user mask: {m['seeded_inside']} tracks seeded inside; stay inside {m['stay_strict']}, "
                     f"within 3px {m['stay_within_3px']}")
    if "rot_err_deg" in r:
        lines.append("ground truth: " + ", ".join(f"{k} {r[k]}" for k in
                     ("rot_err_deg", "trans_dir_err_deg", "focal_err_rel", "track_err_px", "mask_iou")))
    return "\n".join(lines)


def mask_stay(mask: np.ndarray, xy: np.ndarray, vis: np.ndarray, seeds: np.ndarray, tol_px: int = 3) -> dict:
    """Of the tracks seeded inside the user mask, the fraction whose every visible position stays inside
    it (strict) and inside it dilated by ``tol_px`` (boundary tolerance)."""
    import cv2

    T, H, W = mask.shape
    q = pixel_cells_np(xy, W, H)
    kern = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * tol_px + 1, 2 * tol_px + 1))
    dil = np.stack([cv2.dilate(m.astype(np.uint8), kern) > 0 for m in mask])
    t = np.arange(T)[:, None]
    seeded_in = mask[seeds, q[seeds, np.arange(len(seeds)), 1], q[seeds, np.arange(len(seeds)), 0]]
    seeded_in &= vis.sum(0) >= 2
    inside = mask[t, q[..., 1], q[..., 0]] | ~vis
    inside_tol = dil[t, q[..., 1], q[..., 0]] | ~vis
    n = int(seeded_in.sum())
    return {"seeded_inside": n, "stay_strict": float(inside.all(0)[seeded_in].mean()) if n else None,
            "stay_within_3px": float(inside_tol.all(0)[seeded_in].mean()) if n else None}


def synth_report(src: Path, meta: dict, cam: CameraResult, xy, vis, seeds, dynamic) -> dict:
    """The ground-truth keys of ``report.json`` (headline numbers; distributions under ``details``)."""
    truth = SynthTruth(src, meta["indices"], meta["width"], meta["height"])
    ce = camera_errors(cam.viewmats, truth.viewmats)
    te = track_errors(truth, xy, vis, seeds)
    mi = mask_iou(truth, dynamic)
    return {
        "rot_err_deg": ce["rot_err_deg"]["max"],
        "trans_dir_err_deg": None if ce["trans_dir_err_deg"] is None else ce["trans_dir_err_deg"]["max"],
        "focal_err_rel": float(abs(cam.K[0, 0] / truth.K[0, 0] - 1)),
        "track_err_px": te.get("median"),
        "mask_iou": mi["iou"],
        "focal_observed": cam.focal_observed,
        "details": {"camera": ce, "tracks": te, "masks": mi},
    }
