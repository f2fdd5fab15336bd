"""The preprocessing stage of ``recon4d fit``: frames, then every prior, into the scene folder.

Order (each step cached in ``priors/cache.json`` under a hash of its inputs and
settings, so a re-run reuses what is still valid):

    ingest -> flow (DIS) -> tracks (chained) -> camera (BA on static tracks)
           -> points (lifetime track labels, dense static points) -> depth (provider, aligned to the camera)
           -> dynamic masks -> track flags -> report

Why camera before depth: with no learned depth the fallback depth *is* the
triangulated tracks, and with a learned model its per-frame scale/shift is
fitted to those same points. Why the track labels in between: a track on a
moving object that happens to triangulate (it moves along its epipolar line)
would put the object's wrong depth into the fallback depth, so dynamic tracks
are labelled from the solved cameras first and kept out. Why masks last: the
static-motion test needs the cameras (and, when it is trusted, the depth).

Outputs (the contract later stages read; see ../shared/DESIGN.md):
``frames/``, ``frames.json``, ``priors/{camera.json, depth.npz, tracks.npz, masks.npz, flow.npz, points.npz}``,
``priors/report.json`` (ground-truth metrics on ``recon4d synth`` scenes, timings always).
"""

from __future__ import annotations

import json
import time
import warnings
from functools import partial
from pathlib import Path

import numpy as np

from recon4d.io.atomic import atomic_path, write_json
from recon4d.io.frames import IngestOptions, ingest, load_frames, load_masks
from recon4d.priors import cache as C
from recon4d.priors.camera import CameraOptions, CameraResult, CameraSolver
from recon4d.priors.camera_check import flow_disagreement
from recon4d.priors.camera_init import triangulate
from recon4d.priors.depth import FALLBACK_WARNING, DepthAnythingV2, SparseDepth, SynthGTDepth, UserDepth, align
from recon4d.priors.epipolar import max_inverse_depth
from recon4d.priors.flow import DISFlow
from recon4d.priors.masks import MotionMasks, TrackMotion, track_dynamic
from recon4d.priors.options import PreprocessConfig
from recon4d.priors.report import SynthTruth, is_synth_scene, mask_stay, summary, synth_report
from recon4d.priors.tracks import ChainedTracks


def scene_dir(cfg: PreprocessConfig) -> Path:
    src = Path(cfg.video)
    if cfg.name:
        return Path(cfg.out) / cfg.name
    if is_synth_scene(src):
        return Path(cfg.out) / json.loads((src / "synth.json").read_text())["scene_id"]
    return Path(cfg.out) / (src.stem if src.is_file() else src.name)


def run_preprocess(cfg: PreprocessConfig | Path, scene: Path | None = None, log=print) -> Path:
    """Run ingestion and every prior into ``scene`` (default ``<out>/<name>``); returns the scene folder.

    ``cfg`` may be just the input path (all defaults), as ``recon4d fit`` calls it; ``log`` receives
    the short report.
    """
    if not isinstance(cfg, PreprocessConfig):
        cfg = PreprocessConfig(video=Path(cfg))
    scene = Path(scene) if scene is not None else scene_dir(cfg)
    src = Path(cfg.video)
    synth = is_synth_scene(src) if src.is_dir() else False
    if (cfg.depth == "gt" or cfg.camera == "gt") and not synth:
        raise ValueError("--depth gt / --camera gt need a `recon4d synth` scene folder as --video")
    times: dict[str, float] = {}
    clock = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        times[step] = round(now - clock, 3)
        clock = now

    opt = IngestOptions(cfg.stride, cfg.start, cfg.end, cfg.max_frames, cfg.long_side, cfg.allow_truncated, cfg.masks)
    ingest(src, scene, opt, progress=cfg.progress)
    frames, meta = load_frames(scene)
    user = load_masks(scene)
    T, H, W = frames.shape[:3]
    lap("ingest")
    priors = scene / "priors"
    cache = C.PriorCache(priors)
    digest = C.frames_digest(scene)

    flow = DISFlow()
    k_flow = C.key(digest, repr(flow), C.source_digest(DISFlow))
    if cache.fresh("flow", k_flow, "flow.npz"):
        z = np.load(priors / "flow.npz")
        fwd, bwd = z["forward"].astype(np.float32), z["backward"].astype(np.float32)
    else:
        fwd, bwd = flow.compute(frames, cfg.progress)
        _save(priors / "flow.npz", compress=False, forward=fwd.astype(np.float16), backward=bwd.astype(np.float16))
        cache.store("flow", k_flow)
    lap("flow")

    spacing = cfg.track_spacing or max(4, round(max(W, H) / 60))
    tracker = ChainedTracks(spacing=spacing, max_tracks=cfg.max_tracks)
    k_tracks = C.key(k_flow, repr(tracker), C.source_digest(ChainedTracks))
    if cache.fresh("tracks", k_tracks, "tracks_raw.npz"):
        z = np.load(priors / "tracks_raw.npz")
        xy, vis, seeds = z["xy"], z["visible"], z["seed_frame"]
    else:
        xy, vis, seeds = tracker.compute(frames, fwd, bwd, cfg.progress)
        _save(priors / "tracks_raw.npz", xy=xy, visible=vis, seed_frame=seeds)
        cache.store("tracks", k_tracks)
    lap("tracks")

    in_user = track_dynamic(user > 0, xy, vis, frac=1e-6) if user is not None else np.zeros(xy.shape[1], bool)
    provider = _depth_provider(cfg, src, synth)
    cam_opt = CameraOptions(fov_deg=cfg.fov_deg)
    prior_before = provider.kind == "depth" and provider.name != "sparse-fallback"
    k_depth_raw = C.key(digest, repr(provider), C.source_digest(type(provider)))
    raw = None
    if prior_before:  # a depth prior in depth units helps the camera (focal under forward motion)
        raw = _raw_depth(provider, frames, meta, cfg.progress)
    k_cam = C.key(k_tracks, repr(cam_opt), cfg.camera, k_depth_raw if prior_before else None,
                  C.source_digest(CameraSolver, flow_disagreement))
    if cache.fresh("camera", k_cam, "camera.json", "camera_points.npz"):
        cam = _load_camera(priors)
    else:
        if cfg.camera == "gt":
            cam = _gt_camera(src, meta, xy, vis, ~in_user)
        else:
            judge = partial(flow_disagreement, xy=xy, vis=vis, static=~in_user, fwd=fwd,
                            ignore=None if user is None else user > 0)
            cam = CameraSolver(cam_opt).solve(xy, vis, ~in_user, W, H, prior_depth=None if raw is None else raw[0],
                                              judge=judge)
        _save_camera(priors, cam, W, H)
        cache.store("camera", k_cam)
    lap("camera")

    motion = TrackMotion()
    k_points = C.key(k_cam, repr(motion), C.source_digest(TrackMotion, triangulate))
    if cache.fresh("points", k_points, "points.npz"):
        z = np.load(priors / "points.npz")
        moving, points = z["dynamic"], z["points"]
    else:
        # parallax bound from the adjustment's own (static) points, before any track is labelled
        moving = motion.labels(xy, vis, cam.K, cam.viewmats, max_inverse_depth(cam.points, cam.viewmats, vis)) | in_user
        points = cam.points.copy()
        points[moving] = np.nan
        if cam.motion_type in ("translation", "general", "gt"):  # densify: every track that moves like a static one
            tri = triangulate(xy, vis, cam.K, cam.viewmats, ~moving)
            points = np.where(np.isfinite(points), points, tri)
        _save(priors / "points.npz", dynamic=moving, points=points)
        cache.store("points", k_points)
    lap("points")

    k_depth = C.key(k_points, k_depth_raw, C.source_digest(align, SparseDepth))
    if cache.fresh("depth", k_depth, "depth.npz"):
        depth = np.load(priors / "depth.npz")["depth"]
    else:
        if provider.name == "sparse-fallback":
            warnings.warn(FALLBACK_WARNING, stacklevel=2)
            values, kind = provider.estimate(frames, cam.K, cam.viewmats, points, xy, vis, cfg.progress)
        else:
            values, kind = raw if raw is not None else _raw_depth(provider, frames, meta, cfg.progress)
        depth, fits = align(values, kind, cam.K, cam.viewmats, points, xy, vis)
        _save(priors / "depth.npz", depth=depth, scale_shift=fits.astype(np.float32), provider=np.array(provider.name))
        cache.store("depth", k_depth)
    lap("depth")

    masker = MotionMasks()
    trusted = provider.name != "sparse-fallback"  # the fallback is only right at the tracks
    k_mask = C.key(k_depth, repr(masker), trusted, C.source_digest(MotionMasks))  # user masks: in the frames digest
    if cache.fresh("masks", k_mask, "masks.npz", "tracks.npz"):
        dynamic = np.load(priors / "masks.npz")["dynamic"]
    else:
        dynamic, resid = masker.compute(fwd, bwd, cam.K, cam.viewmats, max_inverse_depth(points, cam.viewmats, vis),
                                        depth if trusted else None, (xy, vis, moving), user)
        _save(priors / "masks.npz", compress=True, dynamic=dynamic, residual=np.minimum(resid, 1e4).astype(np.float16))
        # a moving-labelled track outside the merged mask is one the user's masks overrule (see merge_user)
        dyn_tracks = track_dynamic(dynamic, xy, vis) | (moving if user is None else in_user)
        _save(priors / "tracks.npz", xy=xy, visible=vis, dynamic=dyn_tracks, seed_frame=seeds,
              points_world=points.astype(np.float32))
        cache.store("masks", k_mask)
    lap("masks")

    report = {"frames": T, "width": W, "height": H, "fps": meta["fps"], "tracks": int(xy.shape[1]),
              "tracks_kept": int((vis.sum(0) >= 2).sum()), "tracks_static_ba": int(cam.static.sum()),
              "motion_type": cam.motion_type, "depth_provider": provider.name, "camera": cfg.camera,
              "fov_deg": float(np.degrees(2 * np.arctan(W / 2 / cam.K[0, 0]))), "camera_info": cam.info,
              "time_s": times}
    if user is not None:
        report["user_mask_tracks"] = mask_stay(user > 0, xy, vis, seeds)
    if synth:
        report.update(synth_report(src, meta, cam, xy, vis, seeds, dynamic))
    times["total"] = round(sum(times.values()), 3)
    write_json(priors / "report.json", report)
    log(summary(report, scene))
    return scene


def _depth_provider(cfg: PreprocessConfig, src: Path, synth: bool):
    if cfg.depth == "gt":
        return SynthGTDepth(str(src))
    if cfg.depth == "fallback":
        return SparseDepth()
    if cfg.depth in ("auto", "da-v2"):
        # auto never reaches the network; da-v2 is the user asking for the model, so a hub id may download
        da = DepthAnythingV2(cfg.depth_model, download=cfg.depth == "da-v2")
        if da.available():
            return da
        if cfg.depth == "da-v2":
            raise FileNotFoundError(f"Depth Anything V2: {cfg.depth_model!r} is not a directory with a config.json")
        return SparseDepth()
    if Path(cfg.depth).is_dir():
        return UserDepth(cfg.depth)
    raise ValueError(f"unknown --depth {cfg.depth!r}: auto, da-v2, fallback, gt or a folder of depth files")


def _raw_depth(provider, frames, meta, progress):
    if isinstance(provider, (SynthGTDepth, UserDepth)):
        return provider.estimate(frames, meta["indices"], progress=progress)
    return provider.estimate(frames, progress=progress)


def _gt_camera(src: Path, meta: dict, xy, vis, candidate) -> CameraResult:
    truth = SynthTruth(src, meta["indices"], meta["width"], meta["height"])
    view = truth.viewmats @ np.linalg.inv(truth.viewmats[0])  # frame 0 at the origin, as the solver does
    pts = triangulate(xy, vis, truth.K, view, candidate)
    return CameraResult(truth.K, view, "gt", candidate, pts, True, {"source": "gt"})


def _save(path: Path, compress: bool = False, **arrays) -> None:
    with atomic_path(path) as tmp:
        (np.savez_compressed if compress else np.savez)(tmp, **arrays)


def _save_camera(priors: Path, cam: CameraResult, W: int, H: int) -> None:
    _save(priors / "camera_points.npz", static=cam.static, points=cam.points)
    write_json(priors / "camera.json", {
        "K": cam.K.tolist(), "viewmats": cam.viewmats.tolist(), "width": W, "height": H,
        "motion_type": cam.motion_type, "focal_observed": cam.focal_observed,
        "convention": "OpenCV camera (x right, y down, z forward); viewmat = world-to-camera; world = frame 0 camera",
        "info": cam.info,
    })


def _load_camera(priors: Path) -> CameraResult:
    c = json.loads((priors / "camera.json").read_text())
    z = np.load(priors / "camera_points.npz")
    return CameraResult(np.array(c["K"]), np.array(c["viewmats"]), c["motion_type"], z["static"], z["points"],
                        c["focal_observed"], c["info"])


if __name__ == "__main__":  # `python -m recon4d.priors.pipeline --video ... [--depth gt] [--camera gt]`: ablations
    import tyro

    run_preprocess(tyro.cli(PreprocessConfig))
