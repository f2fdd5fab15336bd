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

Each step is a :class:`Step` (its files, how its key extends the one before it,
compute / save / load) in :data:`STEPS`; :func:`run_steps` does the caching and the
timing for all of them. Outputs (the contract later stages read, paths in
:class:`recon4d.scene_folder.SceneFolder`): ``frames/``, ``frames.json``,
``priors/{camera.json, depth.npz, tracks.npz, masks.npz, flow.npz, points.npz}``,
``priors/report.json`` (ground-truth metrics on ``recon4d synth`` scenes, timings always).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from recon4d.errors import UserError
from recon4d.io.atomic import atomic_path, write_json
from recon4d.io.frames import IngestOptions, ingest, load_frames, load_masks
from recon4d.priors import cache as C
from recon4d.priors.camera import CameraOptions, CameraResult, CameraSolver
from recon4d.priors.camera_check import camera_score
from recon4d.priors.camera_init import triangulate
from recon4d.priors.depth import FALLBACK_WARNING, DepthAnythingV2, SparseDepth, SynthGTDepth, UserDepth, align
from recon4d.priors.epipolar import max_inverse_depth
from recon4d.priors.flow import DISFlow
from recon4d.priors.masks import RESIDUAL_CAP_PX, MotionMasks, TrackMotion, track_dynamic
from recon4d.priors.options import PreprocessConfig
from recon4d.priors.report import SynthTruth, is_synth_scene, mask_stay, summary, synth_report
from recon4d.priors.tracks import ChainedTracks
from recon4d.scene_folder import SceneFolder


class PriorRun:
    """One run of the priors: its inputs, what each step adds to it (set by its setup, then by its
    compute or load), and every key made so far."""

    # flow: its tool; forward and backward flow, float32 [T-1, H, W, 2]
    flow: DISFlow
    fwd: np.ndarray
    bwd: np.ndarray
    # tracks: its tool; positions [T, N, 2], visibility [T, N], seed frame [N]
    tracker: ChainedTracks
    xy: np.ndarray
    vis: np.ndarray
    seeds: np.ndarray
    # camera: tracks inside the user's masks [N]; the depth provider and, when the solve uses it
    # (prior_before), its raw (values, kind); the solver's options; the cameras
    in_user: np.ndarray
    provider: object
    prior_before: bool
    raw: tuple | None
    cam_opt: CameraOptions
    cam: CameraResult
    # points: its tool; moving tracks [N]; static world points [N, 3] (NaN where unknown)
    motion: TrackMotion
    moving: np.ndarray
    points: np.ndarray
    # depth: aligned depth [T, H, W] and per-frame (scale, shift)
    depth: np.ndarray
    fits: np.ndarray
    # masks: its tool; whether the depth is right away from the tracks too (not the sparse fallback);
    # dynamic masks [T, H, W] and the motion residual
    masker: MotionMasks
    trusted: bool
    dynamic: np.ndarray
    resid: np.ndarray

    def __init__(self, cfg: PreprocessConfig, src: Path, synth: bool, folder: SceneFolder):
        self.cfg, self.src, self.synth, self.folder = cfg, src, synth, folder
        self.frames, self.meta = load_frames(folder.root)
        self.user = load_masks(folder.root)
        self.T, self.H, self.W = self.frames.shape[:3]
        self.keys: dict[str, str] = {}
        """Step name -> its key; also ``frames`` (the frames digest) and ``depth_raw`` (the depth provider's)."""


def _nothing(r: PriorRun) -> None:
    pass


@dataclass(frozen=True)
class Step:
    """One cached prior step."""

    name: str
    extends: str
    """The key this step's key starts from: an upstream step's (or ``frames``), so a change there recomputes it."""
    files: tuple[str, ...]
    """The files it writes (SceneFolder property names): it is reused only when all are there."""
    key: Callable[[PriorRun], tuple]
    """The rest of its key: its settings, other upstream keys, the source digest of its code."""
    compute: Callable[[PriorRun], None]
    save: Callable[[PriorRun], None]
    load: Callable[[PriorRun], None]
    setup: Callable[[PriorRun], None] = _nothing
    """What it needs made on every run, cached or not, before its key (its tool, the depth provider)."""


class _Laps:
    """Seconds per step, each counted from the end of the one before (so nothing in between goes uncounted)."""

    def __init__(self) -> None:
        self.times: dict[str, float] = {}
        self._clock = time.perf_counter()

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        self.times[step] = round(now - self._clock, 3)
        self._clock = now


def run_steps(steps: tuple[Step, ...], r: PriorRun, cache: C.PriorCache, lap: _Laps) -> None:
    """Each step in order: load it when its key and files are current, else compute, save and store its key."""
    for step in steps:
        step.setup(r)
        k = C.key(r.keys[step.extends], *step.key(r))
        r.keys[step.name] = k
        if cache.fresh(step.name, k, *(getattr(r.folder, f) for f in step.files)):
            step.load(r)
        else:
            step.compute(r)
            step.save(r)
            cache.store(step.name, k)
        lap(step.name)


# ---- flow ---------------------------------------------------------------------------------
FLOW_CACHE_DTYPE = np.float16  # half the file; 0.03 px steps up to 64 px of flow, below DIS's own error
def _flow_setup(r: PriorRun) -> None:
    r.flow = DISFlow()


def _flow_compute(r: PriorRun) -> None:
    fwd, bwd = r.flow.compute(r.frames, r.cfg.progress)
    # rounded as the cache stores it, so that a run resumed after this step reads the flow this run uses
    r.fwd, r.bwd = (f.astype(FLOW_CACHE_DTYPE).astype(np.float32) for f in (fwd, bwd))


def _flow_save(r: PriorRun) -> None:
    _save(r.folder.flow, compress=False, forward=r.fwd.astype(FLOW_CACHE_DTYPE),
          backward=r.bwd.astype(FLOW_CACHE_DTYPE))


def _flow_load(r: PriorRun) -> None:
    z = np.load(r.folder.flow)
    r.fwd, r.bwd = z["forward"].astype(np.float32), z["backward"].astype(np.float32)


# ---- tracks -------------------------------------------------------------------------------
def _tracks_setup(r: PriorRun) -> None:
    spacing = r.cfg.track_spacing or max(4, round(max(r.W, r.H) / 60))
    r.tracker = ChainedTracks(spacing=spacing, max_tracks=r.cfg.max_tracks)


def _tracks_compute(r: PriorRun) -> None:
    r.xy, r.vis, r.seeds = r.tracker.compute(r.frames, r.fwd, r.bwd, r.cfg.progress)


def _tracks_save(r: PriorRun) -> None:
    _save(r.folder.tracks_raw, xy=r.xy, visible=r.vis, seed_frame=r.seeds)


def _tracks_load(r: PriorRun) -> None:
    z = np.load(r.folder.tracks_raw)
    r.xy, r.vis, r.seeds = z["xy"], z["visible"], z["seed_frame"]


# ---- camera -------------------------------------------------------------------------------
def _camera_setup(r: PriorRun) -> None:
    r.in_user = (track_dynamic(r.user > 0, r.xy, r.vis, frac=1e-6) if r.user is not None
                 else np.zeros(r.xy.shape[1], bool))
    r.provider = _depth_provider(r.cfg, r.src, r.synth)
    r.cam_opt = CameraOptions(fov_deg=r.cfg.fov_deg)
    r.prior_before = r.provider.kind == "depth" and r.provider.name != "sparse-fallback"
    r.keys["depth_raw"] = C.key(r.keys["frames"], repr(r.provider), C.source_digest(type(r.provider)))
    r.raw = None
    if r.prior_before:  # a depth prior in depth units helps the camera (focal under forward motion)
        r.raw = _raw_depth(r.provider, r.frames, r.meta, r.cfg.progress)


def _camera_compute(r: PriorRun) -> None:
    if r.cfg.camera == "gt":
        r.cam = _gt_camera(r.src, r.meta, r.xy, r.vis, ~r.in_user)
    else:
        judge = partial(camera_score, xy=r.xy, vis=r.vis, static=~r.in_user, fwd=r.fwd,
                        ignore=None if r.user is None else r.user > 0)
        r.cam = CameraSolver(r.cam_opt).solve(r.xy, r.vis, ~r.in_user, r.W, r.H,
                                              prior_depth=None if r.raw is None else r.raw[0], judge=judge)


def _camera_save(r: PriorRun) -> None:
    cam = r.cam
    _save(r.folder.camera_points, static=cam.static, points=cam.points)
    write_json(r.folder.camera, {
        "K": cam.K.tolist(), "viewmats": cam.viewmats.tolist(), "width": r.W, "height": r.H,
        "motion_type": cam.motion_type, "focal_observed": cam.focal_observed,
        "convention": "OpenCV camera (x right, y down, z forward); viewmat = world-to-camera; world = frame 0 camera",
        "info": cam.info,
    })


def _camera_load(r: PriorRun) -> None:
    c = json.loads(r.folder.camera.read_text())
    z = np.load(r.folder.camera_points)
    r.cam = CameraResult(np.array(c["K"]), np.array(c["viewmats"]), c["motion_type"], z["static"], z["points"],
                         c["focal_observed"], c["info"])


# ---- points -------------------------------------------------------------------------------
def _points_setup(r: PriorRun) -> None:
    r.motion = TrackMotion()


def _points_compute(r: PriorRun) -> None:
    cam = r.cam
    # parallax bound from the adjustment's own (static) points, before any track is labelled
    r.moving = r.motion.labels(r.xy, r.vis, cam.K, cam.viewmats,
                               max_inverse_depth(cam.points, cam.viewmats, r.vis)) | r.in_user
    r.points = cam.points.copy()
    r.points[r.moving] = np.nan
    if cam.motion_type in ("translation", "general", "gt"):  # densify: every track that moves like a static one
        tri = triangulate(r.xy, r.vis, cam.K, cam.viewmats, ~r.moving)
        r.points = np.where(np.isfinite(r.points), r.points, tri)


def _points_save(r: PriorRun) -> None:
    _save(r.folder.points, dynamic=r.moving, points=r.points)


def _points_load(r: PriorRun) -> None:
    z = np.load(r.folder.points)
    r.moving, r.points = z["dynamic"], z["points"]


# ---- depth --------------------------------------------------------------------------------
def _depth_compute(r: PriorRun) -> None:
    cam = r.cam
    if r.provider.name == "sparse-fallback":
        warnings.warn(FALLBACK_WARNING, stacklevel=4)  # at run_preprocess's caller
        values, kind = r.provider.estimate(r.frames, cam.K, cam.viewmats, r.points, r.xy, r.vis, r.cfg.progress)
    else:
        values, kind = r.raw if r.raw is not None else _raw_depth(r.provider, r.frames, r.meta, r.cfg.progress)
    r.depth, r.fits = align(values, kind, cam.K, cam.viewmats, r.points, r.xy, r.vis)


def _depth_save(r: PriorRun) -> None:
    _save(r.folder.depth, depth=r.depth, scale_shift=r.fits.astype(np.float32), provider=np.array(r.provider.name))


def _depth_load(r: PriorRun) -> None:
    r.depth = np.load(r.folder.depth)["depth"]


# ---- masks and track flags ----------------------------------------------------------------
def _masks_setup(r: PriorRun) -> None:
    r.masker = MotionMasks()
    r.trusted = r.provider.name != "sparse-fallback"  # the fallback is only right at the tracks


def _masks_compute(r: PriorRun) -> None:
    cam = r.cam
    r.dynamic, r.resid = r.masker.compute(r.fwd, r.bwd, cam.K, cam.viewmats,
                                          max_inverse_depth(r.points, cam.viewmats, r.vis),
                                          r.depth if r.trusted else None, (r.xy, r.vis, r.moving), r.user)


def _masks_save(r: PriorRun) -> None:
    _save(r.folder.masks, compress=True, dynamic=r.dynamic,
          residual=np.minimum(r.resid, RESIDUAL_CAP_PX).astype(np.float16))
    # a moving-labelled track outside the merged mask is one the user's masks overrule (see merge_user)
    dyn_tracks = track_dynamic(r.dynamic, r.xy, r.vis) | (r.moving if r.user is None else r.in_user)
    _save(r.folder.tracks, xy=r.xy, visible=r.vis, dynamic=dyn_tracks, seed_frame=r.seeds,
          points_world=r.points.astype(np.float32))


def _masks_load(r: PriorRun) -> None:
    r.dynamic = np.load(r.folder.masks)["dynamic"]


STEPS = (
    # name, the key it extends, its files, the rest of its key (user masks: in the frames digest),
    # then compute, save, load and setup
    Step("flow", "frames", ("flow",),
         lambda r: (repr(r.flow), C.source_digest(DISFlow)),
         _flow_compute, _flow_save, _flow_load, _flow_setup),
    Step("tracks", "flow", ("tracks_raw",),
         lambda r: (repr(r.tracker), C.source_digest(ChainedTracks)),
         _tracks_compute, _tracks_save, _tracks_load, _tracks_setup),
    Step("camera", "tracks", ("camera", "camera_points"),
         lambda r: (repr(r.cam_opt), r.cfg.camera, r.keys["depth_raw"] if r.prior_before else None,
                    C.source_digest(CameraSolver, camera_score)),
         _camera_compute, _camera_save, _camera_load, _camera_setup),
    Step("points", "camera", ("points",),
         lambda r: (repr(r.motion), C.source_digest(TrackMotion, triangulate)),
         _points_compute, _points_save, _points_load, _points_setup),
    Step("depth", "points", ("depth",),
         lambda r: (r.keys["depth_raw"], C.source_digest(align, SparseDepth)),
         _depth_compute, _depth_save, _depth_load),
    Step("masks", "depth", ("masks", "tracks"),
         lambda r: (repr(r.masker), r.trusted, C.source_digest(MotionMasks)),
         _masks_compute, _masks_save, _masks_load, _masks_setup),
)
"""The priors in order; each key extends the one before it: frames -> flow -> tracks -> camera -> points
-> depth -> masks, and the depth provider's key goes into depth's (and into camera's when the camera
uses the depth)."""


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
        raise UserError(f"{src}: --depth gt / --camera gt need a `recon4d synth` scene folder as --video")
    lap = _Laps()

    opt = IngestOptions(cfg.stride, cfg.start, cfg.end, cfg.max_frames, cfg.long_side, cfg.allow_truncated, cfg.masks,
                        cfg.spread)
    ingest(src, scene, opt, progress=cfg.progress)
    folder = SceneFolder(scene)
    r = PriorRun(cfg, src, synth, folder)
    lap("ingest")
    cache = C.PriorCache(folder.cache)
    r.keys["frames"] = C.frames_digest(scene)
    run_steps(STEPS, r, cache, lap)

    times = lap.times
    cam, xy, vis, W = r.cam, r.xy, r.vis, r.W
    report = {"frames": r.T, "width": W, "height": r.H, "fps": r.meta["fps"], "tracks": int(xy.shape[1]),
              "tracks_kept": int((vis.sum(0) >= 2).sum()), "tracks_static_ba": int(cam.static.sum()),
              "motion_type": cam.motion_type, "depth_provider": r.provider.name, "camera": cfg.camera,
              "fov_deg": float(np.degrees(2 * np.arctan(W / 2 / cam.K[0, 0]))), "camera_info": cam.info,
              "time_s": times}
    if r.user is not None:
        report["user_mask_tracks"] = mask_stay(r.user > 0, xy, vis, r.seeds)
    if synth:
        report.update(synth_report(src, r.meta, cam, xy, vis, r.seeds, r.dynamic))
    times["total"] = round(sum(times.values()), 3)
    write_json(folder.report, report)
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


if __name__ == "__main__":  # `python -m recon4d.priors.pipeline --video ... [--depth gt] [--camera gt]`: ablations
    import tyro

    run_preprocess(tyro.cli(PreprocessConfig))
