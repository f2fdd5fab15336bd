"""``generate``: config -> scene(s) -> rendered frames, ground truth and questions on disk.

The order is fixed so a scene is a pure function of its config: lay out (all the
randomness), ask questions (pure geometry), render, write. For a minimal pair
only the questions both scenes can ask are kept, so question i of one scene is
question i of the other and their ids are linked in ``gt/questions.json``.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from recon4d import __version__
from recon4d.io.atomic import write_json
from recon4d.io.video import write_video
from recon4d.synth import questions as Q
from recon4d.synth.cameras import GLOBAL_VIEW_FOV_DEG, global_view, intrinsics
from recon4d.synth.config import SynthConfig
from recon4d.synth.layout import build_scenes
from recon4d.synth.render import SceneRenderer
from recon4d.synth.scene import SHAPES, Scene
from recon4d.synth.writer import write_cameras, write_depth, write_frame, write_objects


@dataclass
class SceneReport:
    """What ``generate`` did for one scene (printed by the CLI, not written to disk)."""

    path: Path
    gaussians: int
    questions: int
    render_s: float
    total_s: float


def generate(cfg: SynthConfig, progress: bool = False) -> list[SceneReport]:
    """Write one scene (or a minimal pair) under ``cfg.out``; returns a report per scene."""
    scenes = build_scenes(cfg)
    asked = [Q.ask(s) for s in scenes]
    if len(scenes) == 2:
        common = {q.key for q in asked[0]} & {q.key for q in asked[1]}
        asked = [[q for q in qs if q.key in common] for qs in asked]
    reports = []
    for scene, qs in zip(scenes, asked):
        start = time.perf_counter()
        entries, meta = Q.to_vlm4d(scene, Q.add_false_positives(scene, qs))
        if scene.pair is not None:
            for m in meta:
                m["partner_id"] = m["id"].replace(scene.scene_id, scene.pair["partner"], 1)
        folder = Path(cfg.out) / scene.scene_id
        renderer = SceneRenderer(scene, cfg.detail)
        render_s = _render_and_write(cfg, scene, renderer, folder, progress)
        write_objects(folder / "gt", scene)
        write_json(folder / "gt" / "questions.json", meta)
        write_json(folder / "qa.json", entries)
        write_json(folder / "synth.json", _record(cfg, scene, renderer.num_gaussians))
        reports.append(SceneReport(folder, renderer.num_gaussians, len(entries), render_s, time.perf_counter() - start))
    return reports


def _render_and_write(cfg: SynthConfig, scene: Scene, renderer: SceneRenderer, folder: Path, progress: bool) -> float:
    """Render every frame from the input (and novel) camera and write frames, video, depth, cameras.

    Returns the seconds spent in the frame loop (rasterizing and writing frames); the first
    rasterize call, which may compile the CPU kernel, happens before it when there is a novel view.
    """
    T, H, W = scene.frames, scene.height, scene.width
    views, Ks = scene.viewmats[None], scene.K[None]
    if cfg.novel:
        # docs/design.md's global view needs the depth at the centre of the middle frame.
        mid = renderer.render(T // 2, scene.viewmats[T // 2][None], scene.K[None])[0]
        novel_view = global_view(scene.viewmats[T // 2], float(mid.depth[H // 2, W // 2]))
        novel_K = intrinsics(GLOBAL_VIEW_FOV_DEG, W, H)
        views = np.stack([scene.viewmats, np.repeat(novel_view[None], T, 0)])
        Ks = np.stack([scene.K, novel_K])
    depth = np.zeros((len(Ks), T, H, W), np.float32)
    alpha = np.zeros_like(depth)
    rgb = []
    t0 = time.perf_counter()
    for t, frames in enumerate(tqdm(renderer.frames(views, Ks), total=T, desc=scene.scene_id, disable=not progress, unit="frame")):
        for c, frame in enumerate(frames):
            write_frame(folder if c == 0 else folder / "gt" / "novel", t, frame)
            depth[c, t], alpha[c, t] = frame.depth, frame.alpha
        rgb.append(frames[0].rgb)
    render_s = time.perf_counter() - t0
    write_video(folder / "video.mp4", rgb, cfg.fps)
    write_depth(folder / "gt" / "depth.npz", depth[0], alpha[0])
    write_cameras(folder / "gt", scene.K, scene.viewmats, W, H, cfg.fps, cfg.fov_deg)
    if cfg.novel:
        write_depth(folder / "gt" / "novel" / "depth.npz", depth[1], alpha[1])
        write_cameras(folder / "gt" / "novel", Ks[1], views[1], W, H, cfg.fps, GLOBAL_VIEW_FOV_DEG)
    return render_s


def _record(cfg: SynthConfig, scene: Scene, gaussians: int) -> dict:
    """``synth.json``: the config, the command that regenerates it, and what was drawn from the seed."""
    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(cfg).items() if k != "out"}
    return {
        "generator": f"recon4d synth {__version__}",
        "scene_id": scene.scene_id,
        "seed": cfg.seed,
        "command": command_line(cfg),
        "config": config,
        "pair": scene.pair,
        "camera_sign": scene.camera_sign,
        "layout_attempt": scene.layout_attempt,
        "objects": [
            {"id": o.id, "name": o.name, "colour": o.colour, "shape": o.shape, "dims": list(SHAPES[o.shape]), "motion": o.motion}
            for o in scene.objects
        ],
        "gaussians": gaussians,
    }


def command_line(cfg: SynthConfig) -> str:
    """The ``recon4d synth`` invocation that rebuilds this config (output folder left to the user)."""
    args = ["recon4d", "synth"]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        flag = "--" + f.name.replace("_", "-")
        if f.name == "out" or value is None:
            continue
        if isinstance(value, bool):
            args.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif isinstance(value, tuple):
            if value:
                args += [flag, *map(str, value)]
        else:
            args += [flag, str(value)]
    return shlex.join(args)
