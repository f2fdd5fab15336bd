"""Turn a config and seed into one scene (or a minimal pair) whose ground truth is visible.

Objects are placed by rejection sampling: draw positions from the seed, simulate
every frame, and keep the first placement in which each object's centre stays
in the picture, unhidden by a nearer object, with no collisions and no camera
inside an object. The checks are what let the tests demand that every object's
projected centre falls inside its own mask in every frame.

A minimal pair draws its random numbers once and builds both scenes from them,
so the two differ only in the one motion the factor names.
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from recon4d.synth import motions as M
from recon4d.geometry import camera_centres
from recon4d.synth.cameras import camera_path, intrinsics, project
from recon4d.synth.config import MOTIONS, PAIR_FACTORS, SynthConfig, SynthError
from recon4d.synth.scene import COLOURS, SHAPES, Scene, SceneObject, bounding_radius, half_height

MAX_ATTEMPTS = 300
CAMERA_CLEARANCE = 0.3  # metres between the camera and any object's bounding sphere
TALLEST = 1.0  # metres; no object is taller
STAGE_DEPTH = (-1.5, 2.5)  # world y range of object anchors (the camera is at -distance)
STAGE_WIDTH = 0.6  # anchors span this fraction of the half view width at the stage centre


def build_scenes(cfg: SynthConfig) -> list[Scene]:
    """One scene, or two for ``cfg.pairs``; raises :class:`SynthError` when impossible."""
    cfg.validate()
    rng = np.random.default_rng(cfg.seed)
    variants = _choose_motions(cfg, rng)
    n = len(variants[0])
    colours = [str(c) for c in rng.permutation(list(COLOURS))[:n]]
    shapes = [str(s) for s in rng.choice(list(SHAPES), size=n)]
    camera_sign = float(rng.choice([-1.0, 1.0]))

    t = np.linspace(0.0, 1.0, cfg.frames)
    width, height = cfg.size
    K = intrinsics(cfg.fov_deg, width, height)
    views = camera_path(cfg.camera, t, cfg.camera_distance, cfg.camera_height, camera_sign)
    _check_camera_outside_stage(cfg, views)

    failures: Counter[str] = Counter()
    for attempt in range(MAX_ATTEMPTS):
        draws = np.random.default_rng([cfg.seed, attempt]).random((n, 4))
        scenes = []
        for motions in variants:
            objects = _place(cfg, draws, motions, colours, shapes, views[0], t)
            scenes.append(Scene("", cfg.seed, objects, K, views, width, height, camera_sign, layout_attempt=attempt))
        problem = next((p for s in scenes if (p := find_problem(s)) is not None), None)
        if problem is None:
            return _name(cfg, scenes, variants)
        failures[problem] += 1
    summary = ", ".join(f"{why} ({k}x)" for why, k in failures.most_common())
    raise SynthError(
        f"could not place {n} object(s) with motions {' / '.join(' '.join(v) for v in variants)} so that "
        f"each stays visible in all {cfg.frames} frames ({MAX_ATTEMPTS} attempts failed: {summary}). "
        "Try a wider --fov-deg, a larger --camera-distance, fewer objects or other motions."
    )


def _choose_motions(cfg: SynthConfig, rng: np.random.Generator) -> list[tuple[str, ...]]:
    """The motions of every object, once per scene (two tuples for a pair)."""
    motions = list(cfg.motion)
    factor = PAIR_FACTORS.get(cfg.pairs) if cfg.pairs else None
    if not motions:
        n = cfg.objects or int(rng.integers(1, 4))
        if factor is not None:
            n = max(n, factor[1] + 1)
        first = [m for m in MOTIONS if not m.startswith("follow")]
        if cfg.pairs == "follow":
            first = ["left", "right"]
        motions = [str(rng.choice(first))]
        for _ in range(1, n):
            pool = [m for m in MOTIONS if not m.startswith("follow") or motions[0] in ("left", "right")]
            motions.append(str(rng.choice(pool)))
    if factor is None:
        return [tuple(motions)]
    (a, b), changed = factor
    if changed >= len(motions):
        raise SynthError(f"--pairs {cfg.pairs} needs at least {changed + 1} objects, got --objects {len(motions)}")
    return [tuple(motions[:changed] + [m] + motions[changed + 1 :]) for m in (a, b)]


def _place(cfg, draws, motions, colours, shapes, view0, t) -> list[SceneObject]:
    """Objects for one attempt: ``draws[i]`` (4 uniforms) fixes object i's anchor and heading.

    Object i is anchored in the i-th depth lane of the stage (nearest first), which
    keeps objects from walking through each other.
    """
    half_width = cfg.camera_distance * math.tan(math.radians(cfg.fov_deg) / 2)
    lane = (STAGE_DEPTH[1] - STAGE_DEPTH[0]) / len(motions)
    objects: list[SceneObject] = []
    for i, motion in enumerate(motions):
        u = draws[i]
        anchor = np.array([STAGE_WIDTH * half_width * (2 * u[0] - 1), STAGE_DEPTH[0] + lane * (i + u[1])])
        if motion in ("left", "right", "toward", "away"):
            d = M.travel_direction(motion, anchor, view0)
            heading = math.atan2(d[1], d[0])
        elif motion.startswith("turn"):
            # start roughly across the view (left or right) so the arc reads clearly
            heading = (0.0 if u[2] < 0.5 else math.pi) + math.radians(40.0) * (u[3] - 0.5)
        elif motion.startswith("follow"):
            leader = objects[0]
            heading = M.follow_heading(motion, float(leader.yaw[0]), cfg.follow_offset_deg)
            lead_dir = np.array([math.cos(leader.yaw[0]), math.sin(leader.yaw[0])])
            start = leader.centre[0, :2] - M.FOLLOW_GAP * lead_dir
        else:
            heading = 2 * math.pi * u[2]
        if not motion.startswith("follow"):
            start = anchor - M.displacement(motion, heading) / 2
        centre, yaw = M.trajectory(motion, start, heading, half_height(shapes[i]), t)
        objects.append(SceneObject(i + 1, colours[i], shapes[i], motion, centre, yaw))
    return objects


def find_problem(scene: Scene) -> str | None:
    """Why the scene's ground truth would not be visible, or None when it is fine."""
    eyes = camera_centres(scene.viewmats)  # [T, 3]
    objs = scene.objects
    uv, z, r_px = [], [], []
    for o in objs:
        if np.any(np.linalg.norm(o.centre - eyes, axis=-1) < o.radius + CAMERA_CLEARANCE):
            return "the camera is inside an object"
        p, d = zip(*(project(o.centre[k], scene.viewmats[k], scene.K) for k in range(scene.frames)))
        p, d = np.stack(p), np.array(d)
        if np.any(d < o.radius + CAMERA_CLEARANCE):
            return "an object passes behind the camera"
        rad = scene.K[0, 0] * o.radius / d
        margin = 0.3 * rad + 1.0
        if np.any((p < margin[:, None]) | (p > np.array([scene.width, scene.height]) - margin[:, None])):
            return "an object leaves the picture"
        uv.append(p), z.append(d), r_px.append(rad)
    for i in range(len(objs)):
        for j in range(i + 1, len(objs)):
            if np.any(np.linalg.norm(objs[i].centre - objs[j].centre, axis=-1) < objs[i].radius + objs[j].radius):
                return "two objects collide"
            gap = np.linalg.norm(uv[i] - uv[j], axis=-1)
            near_r = np.where(z[i] < z[j], r_px[i], r_px[j])
            far_r = np.where(z[i] < z[j], r_px[j], r_px[i])
            if np.any(gap < near_r + 0.25 * far_r):
                return "one object hides another"
    return None


def _check_camera_outside_stage(cfg: SynthConfig, views: np.ndarray) -> None:
    """Refuse cameras that sit among the objects, before any sampling."""
    half_width = cfg.camera_distance * math.tan(math.radians(cfg.fov_deg) / 2)
    stage = math.hypot(STAGE_WIDTH * half_width, max(map(abs, STAGE_DEPTH))) + M.TRANSLATE_LENGTH / 2
    stage += max(bounding_radius(s) for s in SHAPES)
    eyes = camera_centres(views)
    inside = (np.linalg.norm(eyes[:, :2], axis=-1) < stage) & (eyes[:, 2] < TALLEST + CAMERA_CLEARANCE)
    if np.any(inside):
        k = int(np.argmax(inside))
        raise SynthError(
            f"impossible camera: at frame {k} it is at {(np.round(eyes[k], 2) + 0.0).tolist()} m, inside the stage "
            f"where objects move (radius {stage:.1f} m, objects up to {TALLEST} m tall); "
            f"raise --camera-height above {TALLEST + CAMERA_CLEARANCE} or --camera-distance"
        )


def _name(cfg: SynthConfig, scenes: list[Scene], variants: list[tuple[str, ...]]) -> list[Scene]:
    """Scene ids, and the links between the two scenes of a pair."""
    base = cfg.scene_id or f"synth_s{cfg.seed}"
    if len(scenes) == 1:
        scenes[0].scene_id = base
        return scenes
    (_, changed) = PAIR_FACTORS[cfg.pairs]
    ids = [f"{base}_{cfg.pairs}_{v[changed].removeprefix(cfg.pairs + '_')}" for v in variants]
    for k, scene in enumerate(scenes):
        scene.scene_id = ids[k]
        scene.pair = {
            "pair_id": f"{base}_{cfg.pairs}",
            "factor": cfg.pairs,
            "changed_object": changed + 1,
            "motion": variants[k][changed],
            "partner": ids[1 - k],
        }
    return scenes
