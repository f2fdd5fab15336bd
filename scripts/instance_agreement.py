"""Instance agreement: do the objects the answerer finds in a fitted real clip lie on what the annotators marked?

Why: on a real video without annotations the fitted objects come from the priors' motion masks
(``recon4d.grounding.motion_instances``); if those are water, wake, shadows
or clouds, every answer about "the swan" reads the wrong thing. DAVIS ships foreground masks for some
sequences, so there they can be checked: fit the sequence *without* its masks (the masks must not
reach the fit or the grounding, or the check reads back its own input), then compare.

For each scene folder: the fitted scene is rendered at every input camera with one feature channel per
found object (static Gaussians carry zeros), so a pixel belongs to object k where channel k's composite
weight is at least one half, occlusion by the static scene included, as the annotation's visible
region is. Against the annotation's foreground (every id > 0) it reports

- ``objects``: how many objects the grounding found, ``on``: how many lie mostly on the foreground
  (at least half of their pixels, pooled over the frames), and per object that share and the share
  of its Gaussian centres that project onto the foreground (what its trajectory is made of);
- ``moving_on`` / ``moving``: the same count among the objects the answerer takes to move;
- ``iou``: pooled IoU of the union of the objects with the foreground;
- ``iou_dynamic``: the same for every dynamic Gaussian (before clustering drops small clusters), and
  ``iou_prior``: for the dynamic mask the priors gave the fit, so that a low ``iou`` can be traced to
  the motion masks, the fit or the clustering.

A DAVIS sequence folder's ``Annotations/`` reach the fit by default; a view of the sequences with
their frames only keeps them out (the answers then come from the video alone, as on clips without
masks):

    for d in $(realpath ../shared/data/davis/*/Annotations/..); do
        mkdir -p /tmp/davis-frames/$(basename $d) && ln -s $d/JPEGImages /tmp/davis-frames/$(basename $d)/; done
    .venv/bin/recon4d bench davis --quick --data /tmp/davis-frames --out /tmp/quick20
    .venv/bin/python scripts/instance_agreement.py --scenes /tmp/quick20 [--annotations ../shared/data/davis]

Quick fits of the 16 masked sequences this way (16 frames at 240 px, no depth model): 38 objects, 17 of
them mostly on the annotated object, 11 sequences with at least one; IoU 0.257 for the objects, 0.258
for all dynamic Gaussians, 0.375 for the prior dynamic masks: the loss starts in the motion masks and
the fit's coverage, not in the clustering. (Those objects were scaffold node clusters; from the motion
masks' regions: 27 objects, 15 of them mostly on the annotated object, IoU 0.252.)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from recon4d.grounding.objects import read_id_masks
from recon4d.grounding.trajectories import load_tracks
from recon4d.render.rasterize import rasterize
from recon4d.scene.data import load_scene_data
from recon4d.scene.state import load_scene
from recon4d.scene_folder import SceneFolder

REPO = Path(__file__).resolve().parents[1]
ON_SHARE = 0.5  # an object lies on the annotated foreground when at least this share of its pixels do


def object_maps(scene, data, groups: list[np.ndarray]) -> np.ndarray:
    """Boolean ``[K + 1, T, H, W]``: object k's visible pixels per frame (k < K), then all dynamic Gaussians'.

    ``groups`` are index arrays into the dynamic Gaussians, one per object.
    """
    n_static, n_dyn = len(scene.static), len(scene.dynamic)
    feats = torch.zeros(n_static + n_dyn, len(groups) + 1)
    for k, members in enumerate(groups):
        feats[n_static + torch.as_tensor(members, dtype=torch.long), k] = 1.0
    feats[n_static:, -1] = 1.0
    out = []
    with torch.no_grad():
        for t in range(data.frames):
            g = scene.at(t)
            res = rasterize(g.means, g.quats, g.scales, g.opacities, feats, data.viewmats[t:t + 1], data.K[None],
                            data.width, data.height)
            out.append(res.features[0].numpy() >= 0.5)  # [H, W, K + 1]
    return np.moveaxis(np.stack(out), -1, 0)


def centre_shares(scene, data, groups: list[np.ndarray], fg: np.ndarray) -> list[float]:
    """Per object, the share of its Gaussian centres (pooled over frames, in view) that project onto ``fg``.

    The answerer's trajectories are made of these centres, so this says what its measures read;
    the rendered maps say what the object covers.
    """
    K = data.K.numpy()
    hits, seen = np.zeros(len(groups)), np.zeros(len(groups))
    with torch.no_grad():
        for t in range(data.frames):
            means = scene.at(t, include_static=False).means.numpy()
            view = data.viewmats[t].numpy()
            cam = means @ view[:3, :3].T + view[:3, 3]
            uv = (cam @ K.T)[:, :2] / np.maximum(cam[:, 2:3], 1e-6)
            x, y = np.floor(uv[:, 0]).astype(np.int64), np.floor(uv[:, 1]).astype(np.int64)
            ok = (cam[:, 2] > 0) & (x >= 0) & (x < data.width) & (y >= 0) & (y < data.height)
            on = np.zeros(len(means), bool)
            on[ok] = fg[t, y[ok], x[ok]]
            for k, members in enumerate(groups):
                hits[k] += on[members].sum()
                seen[k] += ok[members].sum()
    return [float(h / s) if s else 0.0 for h, s in zip(hits, seen)]


def foreground(folder: Path, indices: list[int], height: int, width: int) -> np.ndarray:
    """Annotated foreground ``[T, H, W]`` (any id > 0) at the working resolution (nearest sampling)."""
    ids = read_id_masks(folder, indices)
    rows = ((np.arange(height) + 0.5) * ids.shape[1] / height).astype(np.int64)
    cols = ((np.arange(width) + 0.5) * ids.shape[2] / width).astype(np.int64)
    return ids[:, rows][:, :, cols] > 0


def iou(a: np.ndarray, b: np.ndarray) -> float:
    """Pooled IoU of two boolean stacks (1.0 when both are empty)."""
    union = np.logical_or(a, b).sum()
    return float(np.logical_and(a, b).sum() / union) if union else 1.0


def agreement(scene_dir: Path, annotations: Path) -> dict:
    """The numbers of the module docstring for one fitted scene and its annotation folder."""
    st = load_tracks(scene_dir)
    scene, _, _ = load_scene(SceneFolder(scene_dir).model)
    data = load_scene_data(scene_dir)
    info = SceneFolder(scene_dir).frames_info()
    fg = foreground(annotations, info.get("indices", list(range(data.frames))), data.height, data.width)
    maps = object_maps(scene, data, [t.obj.gaussians for t in st.tracks])
    centres = centre_shares(scene, data, [t.obj.gaussians for t in st.tracks], fg)
    objects = []
    for t, m, on_centres in zip(st.tracks, maps[:-1], centres):
        pixels = int(m.sum())
        share = float(np.logical_and(m, fg).sum() / pixels) if pixels else 0.0
        objects.append({"label": t.obj.label, "gaussians": len(t.obj.gaussians), "pixels": pixels,
                        "on_share": round(share, 3), "centres_on_share": round(on_centres, 3),
                        "moving": bool(t.motion.moving)})
    union = maps[:-1].any(0) if len(st.tracks) else np.zeros_like(fg)
    return {"sequence": scene_dir.name, "instances_from": st.instances_from, "objects": len(objects),
            "on": sum(o["on_share"] >= ON_SHARE for o in objects), "moving": sum(o["moving"] for o in objects),
            "moving_on": sum(o["moving"] and o["on_share"] >= ON_SHARE for o in objects), "iou": round(iou(union, fg), 3),
            "iou_dynamic": round(iou(maps[-1], fg), 3),
            "iou_prior": round(iou(data.dynamic_mask.numpy().astype(bool), fg), 3), "per_object": objects}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenes", type=Path, required=True, help="folder of fitted scene folders (e.g. a bench's --out)")
    ap.add_argument("--annotations", type=Path, default=REPO.parent / "shared" / "data" / "davis",
                    help="DAVIS-layout folder holding <sequence>/Annotations/")
    ap.add_argument("--out", type=Path, default=None, help="JSON of every number (default <scenes>/agreement.json)")
    args = ap.parse_args()
    rows = []
    for scene_dir in sorted(p for p in args.scenes.iterdir() if SceneFolder(p).has_fit()):
        folder = args.annotations / scene_dir.name / "Annotations"
        if not folder.is_dir():
            continue
        row = agreement(scene_dir, folder)
        if row["instances_from"].startswith("id masks"):
            print(f"warning: {scene_dir.name}: objects from {row['instances_from']}, not found by the fit")
        rows.append(row)
        shares = " ".join(f"{o['on_share']:.2f}/{o['centres_on_share']:.2f}{'m' if o['moving'] else 's'}"
                          for o in row["per_object"])
        print(f"{row['sequence']:20s} objects {row['objects']} on {row['on']} moving {row['moving_on']}/{row['moving']}  iou {row['iou']:.3f}  "
              f"dynamic {row['iou_dynamic']:.3f}  prior {row['iou_prior']:.3f}  shares [{shares}]", flush=True)
    if not rows:
        raise SystemExit(f"no fitted scene in {args.scenes} has annotations under {args.annotations}")
    total = {"sequences": len(rows), "objects": sum(r["objects"] for r in rows), "on": sum(r["on"] for r in rows),
             "moving": sum(r["moving"] for r in rows), "moving_on": sum(r["moving_on"] for r in rows),
             "with_an_object_on": sum(r["on"] > 0 for r in rows)}
    for key in ("iou", "iou_dynamic", "iou_prior"):
        total[key] = round(float(np.mean([r[key] for r in rows])), 3)
    (args.out or args.scenes / "agreement.json").write_text(json.dumps({"sequences": rows, "total": total}, indent=1))
    print(" ".join(f"{k}={v}" for k, v in total.items()))


if __name__ == "__main__":
    main()
