"""Per-object 3D trajectories of a fitted scene and the motion measures answers are made of.

Turning of a moving object is the turning of its path (its body rotation is
unobservable when it is symmetric); rotation of an object that stays in place is
its body rotation. Why rigid tracks: an object's Gaussians are fitted to its visible side only, so
their centroid is off the object's true centre; when the object spins in place,
the centroid circles and would read as motion. Each object gets one rigid
transform per frame (Kabsch on its Gaussians, reference frame -> frame t), and
its tracked centre is the body point that travels least, kept inside the object
(the spin axis for a spinning object, the object itself for one going round a
bend). Rotation increments of those transforms give turning and spin. Where
the input has id masks, the centre is instead the one the input shows
(``recon4d.grounding.seen``): the fit can explain part of a spinning object
with static Gaussians and smear the rest, which makes even the rigid centre
wander; the rigid fits then only give the body's rotation.

Frames of reference: the world of the fit; the first camera (x right, y down,
z forward); per-frame camera axes (what "from the camera perspective" means when
the camera moves); the global camera of docs/design.md when
``recon4d.render.cameras.global_camera`` exists; and each object's own heading
frame (forward = its direction of travel carried along by its rotation, left,
up). "Up" is the priors' ``world_up`` when they know it, else the normal of the
dominant plane of static Gaussians (the ground) when one exists and faces the
camera, else the first camera's -y axis.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recon4d.geometry import camera_centres, kabsch_np, rotation_vector
from recon4d.grounding.objects import ObjectInstance

# An object moves when its centre gets further than this many object sizes from where it has been
# (the reach, not the path: per-frame rigid fits jitter, and jitter adds up along a path; fitted
# spinning cubes reach 0.4 sizes, moving objects 2.2 or more).
MOVING = 1.0
NOT_ROTATING_DEG = 12.0  # below: not rotating / going straight
ROTATING_DEG = 20.0  # above: rotating / turning; in between the geometry cannot tell
# A body rotation whose axis is within this of up is a spin about up (see track_object): fitted spins
# about up tilt by up to 27 deg on fitted synth pairs, a wheel seen face on is at 90.
SPIN_ABOUT_UP_DEG = 45.0
PLANE_INLIERS = 0.3  # share of static Gaussians on a plane for it to count as the ground
# A frame observes an object when at least this share of its Gaussians project into the image. Why a
# share and not any Gaussian: on quick real fits whole objects jump out of view for a frame or two (a
# kite-surfer's 2870 Gaussians in none of frames 13-14, a goat's rocks in none of frames 4-15) while
# the video shows them throughout; the positions there are no observation, and they read as a
# travel of 17 to 47 object sizes.
IN_VIEW = 0.5
# A camera stays put when its centre moves by less than this share of its distance to the object: a wrong
# depth of the object then moves its image by under a twentieth of that error's own share of the distance.
STILL_CAMERA = 0.05


@dataclass
class Motion:
    """Motion measures of one object over the clip (distances in fit units, angles in degrees)."""

    size: float  # RMS radius of the object's Gaussians: the unit of "moving"
    path: float  # length of the centre's path
    reach: float  # largest distance between two positions of the centre
    net: np.ndarray  # [3] end minus start, in the first camera's axes
    lateral: float  # to the camera's right, summed in per-frame camera axes
    depth: float  # along the viewing axis (+ = away), summed in per-frame camera axes
    rise: float  # along up (+ = upwards)
    radial: float  # change of distance to the camera due to the object's own motion
    forward: float  # along the object's own heading
    yaw_deg: float  # rotation about up, + = counter-clockwise seen from above (a left turn)
    seen_rotation_deg: float  # rotation about the line of sight, + = counter-clockwise as seen
    speeds: np.ndarray  # [T-1] centre speed per frame
    spin_deg: float = 0.0  # the body's own rotation about up, moving or not (revolutions of a dancer)
    roll_deg: float = 0.0  # the body's own rotation about the line of sight, + = counter-clockwise as seen (flips)
    about_up: bool = True  # seen_rotation_deg is yaw_deg foreshortened by the view of up (else it is roll_deg)
    turn_known: bool = True  # False: a moving object with a path half under half its size (``_path_turn``)
    # The centre's path as a camera that stays put sees it (``_view_of_path``): its turn (degrees, unsigned) and
    # its net over its length in the image; None where the camera moves (``STILL_CAMERA``).
    seen_path_turn_deg: float | None = None
    seen_straightness: float | None = None

    @property
    def moving(self) -> bool:
        return self.reach > MOVING * self.size

    @property
    def image_net(self) -> float:
        """Net travel in the image plane (sideways and up): what the offline depth leaves measured."""
        return float(np.hypot(self.lateral, self.rise))


@dataclass
class ObjectTrack:
    """The rigid trajectory of one object and its measures."""

    obj: ObjectInstance
    rots: np.ndarray  # [T, 3, 3] reference frame -> frame t
    trans: np.ndarray  # [T, 3]
    centres: np.ndarray  # [T, 3] world
    heading: np.ndarray  # [T, 3] unit horizontal forward (zero when it never moves)
    motion: Motion
    seen_size: np.ndarray | None = None  # [T] apparent size as the id masks show it, NaN where cut; None without masks
    visible_size: np.ndarray | None = None  # [T] size of the part in view (a lower bound where cut); None without masks
    seen_spin: np.ndarray | None = None  # [T-1] turn about the image's vertical per frame pair; None without masks
    # False under the offline sparse depth (``priors.depth.SparseDepth``), which gives a moving object the depth of
    # the static surface around it: the fitted travel in depth is then no evidence of its own.
    depth_evidence: bool = True

    def centres_in(self, viewmat: np.ndarray) -> np.ndarray:
        """Centres ``[T, 3]`` in the axes of one camera (world-to-camera ``viewmat``)."""
        return self.centres @ viewmat[:3, :3].T + viewmat[:3, 3]

    def window(self, lo: int, hi: int, viewmats: np.ndarray, up: np.ndarray) -> ObjectTrack:
        """This track over frames ``lo:hi`` only, measured afresh (the object's size stays the whole clip's)."""
        rots, centres = self.rots[lo:hi], self.centres[lo:hi]
        heading, motion = measure(rots, centres, self.motion.size, viewmats[lo:hi], up)
        seen_size = None if self.seen_size is None else self.seen_size[lo:hi]
        visible_size = None if self.visible_size is None else self.visible_size[lo:hi]
        seen_spin = None if self.seen_spin is None else self.seen_spin[lo:max(lo, hi - 1)]
        return ObjectTrack(self.obj, rots, self.trans[lo:hi], centres, heading, motion, seen_size, visible_size,
                           seen_spin, self.depth_evidence)

    def in_heading_frame(self, points: np.ndarray, up: np.ndarray) -> np.ndarray:
        """Points ``[T, 3]`` (world, one per frame) as (forward, left, up) from this object at each frame."""
        rel = points - self.centres
        left = np.cross(up, self.heading)
        return np.stack([(rel * self.heading).sum(1), (rel * left).sum(1), rel @ up], 1)



UP_GUESSED = "first camera"  # estimate_up's source when no ground plane is found


def estimate_up(static_means: np.ndarray, viewmat0: np.ndarray, seed: int = 0) -> tuple[np.ndarray, str]:
    """Unit up vector of the world and where it came from ("ground plane" or "first camera")."""
    cam_up = -viewmat0[1, :3]
    cam_up = cam_up / np.linalg.norm(cam_up)
    if len(static_means) < 50:
        return cam_up, UP_GUESSED
    rng = np.random.default_rng(seed)
    pts = static_means[rng.permutation(len(static_means))[:5000]]
    extent = np.linalg.norm(np.percentile(pts, 95, 0) - np.percentile(pts, 5, 0))
    best, best_n = None, 0
    for _ in range(200):
        a, b, c = pts[rng.choice(len(pts), 3, replace=False)]
        n = np.cross(b - a, c - a)
        if np.linalg.norm(n) < 1e-12:
            continue
        n /= np.linalg.norm(n)
        inliers = int((np.abs((pts - a) @ n) < 0.01 * extent).sum())
        if inliers > best_n:
            best, best_n = n, inliers
    if best is None or best_n < PLANE_INLIERS * len(pts):
        return cam_up, UP_GUESSED
    best = best if best @ cam_up > 0 else -best
    if best @ cam_up < math.cos(math.radians(45.0)):
        return cam_up, UP_GUESSED
    return best, "ground plane"


def observed_frames(points: np.ndarray, K: np.ndarray, viewmats: np.ndarray, width: int, height: int) -> np.ndarray:
    """Per frame, whether at least ``IN_VIEW`` of an object's Gaussians ``[T, n, 3]`` project into the image."""
    cam = np.einsum("tij,tnj->tni", viewmats[:, :3, :3], points) + viewmats[:, None, :3, 3]
    uv = np.einsum("ij,tnj->tni", K, cam)[..., :2] / np.maximum(cam[..., 2:3], 1e-6)
    inside = (cam[..., 2] > 0) & (uv[..., 0] >= 0) & (uv[..., 0] < width) & (uv[..., 1] >= 0) & (uv[..., 1] < height)
    return inside.mean(1) >= IN_VIEW


def _hold_unobserved(rots: np.ndarray, centres: np.ndarray, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centres interpolated and rotations held over the frames that do not observe the object.

    Linear between observed frames and constant beyond the first and last (no motion is made up
    where the video shows none); a rotation is held from the last observed frame, so the body's
    total rotation across a gap is kept, only moved to the gap's end.
    """
    seen = np.nonzero(observed)[0]
    if len(seen) == 0 or len(seen) == len(observed):
        return rots, centres
    frames = np.arange(len(observed))
    centres = np.stack([np.interp(frames, seen, centres[seen, k]) for k in range(3)], axis=1)
    last = np.maximum.accumulate(np.where(observed, frames, -1))
    return rots[np.where(last >= 0, last, seen[0])], centres


def track_object(obj: ObjectInstance, tracks: np.ndarray, opacities: np.ndarray, ref: int,
                 viewmats: np.ndarray, up: np.ndarray, observed: np.ndarray | None = None,
                 depth_evidence: bool = True) -> ObjectTrack:
    """Rigid trajectory and motion measures of ``obj`` from the dynamic Gaussian means ``[T, N, 3]``.

    ``observed`` (``[T]`` bool, ``observed_frames``): where the fit's own positions of the object
    are evidence; elsewhere they are bridged (``_hold_unobserved``). Centres seen in id masks are
    evidence in every frame already.
    """
    pts = tracks[:, obj.gaussians]
    w = np.maximum(opacities[obj.gaussians], 1e-3)
    T = len(pts)
    fits = [kabsch_np(pts[ref], pts[t], w) for t in range(T)]
    rots, trans = np.stack([f[0] for f in fits]), np.stack([f[1] for f in fits])
    centroid = w @ pts[ref] / w.sum()
    size = float(np.sqrt(w @ ((pts[ref] - centroid) ** 2).sum(1) / w.sum()))
    if obj.seen is not None:
        centres = obj.seen
    else:
        centres = _least_travelling_centres(rots, trans, centroid, size)
        if observed is not None:
            rots, centres = _hold_unobserved(rots, centres, observed)
    heading, motion = measure(rots, centres, size, viewmats, up)
    return ObjectTrack(obj, rots, trans, centres, heading, motion, obj.seen_size, obj.visible_size, obj.seen_spin,
                       depth_evidence)


def measure(rots: np.ndarray, centres: np.ndarray, size: float, viewmats: np.ndarray,
            up: np.ndarray) -> tuple[np.ndarray, Motion]:
    """Heading per frame and motion measures of a body with rotations ``rots`` and centres ``centres`` ``[T, ...]``.

    Separate from ``track_object`` so that a time window of a track ("at the start of
    the video") is measured exactly as a whole clip is.
    """
    T = len(centres)
    steps = np.diff(centres, axis=0)
    speeds = np.linalg.norm(steps, axis=1)
    path = float(speeds.sum())
    heading = _headings(rots, centres, up, path)

    eyes = camera_centres(viewmats)
    in_cam = np.einsum("tij,tj->ti", viewmats[:-1, :3, :3], steps).sum(0)
    to_obj = centres[:-1] - eyes[:-1]
    to_obj /= np.linalg.norm(to_obj, axis=1, keepdims=True)
    spins = np.stack([rotation_vector(rots[t + 1] @ rots[t].T) for t in range(T - 1)]) if T > 1 else np.zeros((1, 3))
    total = spins.sum(0)
    yaw = spin = float(total @ up)
    roll = float((spins * -to_obj).sum()) if T > 1 else 0.0
    reach = float(np.linalg.norm(centres[:, None] - centres[None], axis=-1).max())
    moving = reach > MOVING * size
    turn_known = True
    if moving:
        # A moving object's turning is the turning of its path: observable even when the
        # body is symmetric (a ball's fitted rotation about its own axis is noise).
        yaw, shortest_half = _path_turn(centres, up)
        turn_known = shortest_half >= 0.5 * MOVING * size  # each half: half of what makes a path a motion
    about_up = moving or abs(yaw) >= math.cos(math.radians(SPIN_ABOUT_UP_DEG)) * np.linalg.norm(total)
    if about_up:
        # A turn, or a spin about up, is seen as its rotation about up foreshortened by the
        # camera's view of that axis. Why not the fitted axis itself: its tilt is fitting noise that
        # the line of sight picks up at full weight (up is foreshortened, at ~0.4 from synth's
        # cameras; measured in docs/decisions.md).
        seen = yaw * float(np.mean(-to_obj @ up))
    else:
        seen = roll
    seen_turn, straightness = _view_of_path(centres, eyes)
    motion = Motion(
        size=size,
        path=path,
        reach=reach,
        net=viewmats[0, :3, :3] @ (centres[-1] - centres[0]),
        lateral=float(in_cam[0]),
        depth=float(in_cam[2]),
        rise=float(steps.sum(0) @ up),
        radial=float((steps * to_obj).sum()),
        forward=float((steps * heading[:-1]).sum()),
        yaw_deg=math.degrees(yaw),
        seen_rotation_deg=math.degrees(seen),
        speeds=speeds,
        spin_deg=math.degrees(spin),
        roll_deg=math.degrees(roll),
        about_up=bool(about_up),
        turn_known=bool(turn_known),
        seen_path_turn_deg=seen_turn,
        seen_straightness=straightness,
    )
    return heading, motion


def _view_of_path(centres: np.ndarray, eyes: np.ndarray) -> tuple[float | None, float | None]:
    """Turn (degrees, unsigned) and straightness (net over length) of the path of ``centres`` ``[T, 3]`` in the
    image of cameras at ``eyes`` ``[T, 3]`` that stay put (``STILL_CAMERA``); (None, None) where they move.

    Why: the rays from a camera that stays put to the object are what the video shows, whatever depth the fit
    gave the object along them, so this view of the path needs no depth. Its image is taken on the plane
    perpendicular to the mean ray, which undoes the camera's own rotation (a pan) exactly.
    """
    rays = centres - eyes
    distance = np.linalg.norm(rays, axis=1)
    if np.linalg.norm(eyes - eyes.mean(0), axis=1).max() > STILL_CAMERA * float(np.median(distance)):
        return None, None
    axis = (rays / distance[:, None]).mean(0)
    axis /= np.linalg.norm(axis)
    along = rays @ axis
    if (along <= 0.5 * distance).any():  # more than 60 degrees off the mean ray: no one image plane holds it
        return None, None
    flat = rays / along[:, None] - axis  # on the plane one unit along the mean ray
    length = float(np.linalg.norm(np.diff(flat, axis=0), axis=1).sum())
    if length <= 0:
        return None, None
    turn, _ = _path_turn(flat, axis)
    return abs(math.degrees(turn)), float(np.linalg.norm(flat[-1] - flat[0]) / length)


def _least_travelling_centres(rots: np.ndarray, trans: np.ndarray, centroid: np.ndarray, size: float) -> np.ndarray:
    """Centres ``[T, 3]`` of the body point (within ``size`` of the centroid) whose squared steps sum least."""
    A = np.concatenate(list(np.diff(rots, axis=0)))  # [(T-1)*3, 3]
    b = np.concatenate(list(np.diff(np.einsum("tij,j->ti", rots, centroid) + trans, axis=0)))
    delta = np.linalg.lstsq(A, -b, rcond=1e-3)[0] if len(A) else np.zeros(3)
    if np.linalg.norm(delta) > size:
        delta *= size / np.linalg.norm(delta)
    return np.einsum("tij,j->ti", rots, centroid + delta) + trans


def _path_turn(centres: np.ndarray, up: np.ndarray) -> tuple[float, float]:
    """Signed total turn (radians, + = left about ``up``) of a path's horizontal travel, and the shorter
    of its two halves' net horizontal travel (the turn is the angle between the halves' directions).

    The travel directions of the path's two halves (split at half the distance
    travelled), each the least-squares direction over all of the half's frames;
    on a path of constant curvature they are a quarter of the turn from either
    end, so twice their angle is the whole turn. Why not the travel directions at
    the two ends: a centre a few per cent off in one end frame (the fit's
    reference frame, often the first, sits ~0.5% nearer or further than its
    neighbours) tilts a direction taken over a few frames by ten degrees or more
    (docs/decisions.md). Why the halves' travel is returned: a half that travels much less than the
    object's size has a direction set by where the fit or the mask puts the centre of a walking
    body from frame to frame, not by where it goes (DAVIS bear: a walk to the left read as a
    344-degree turn, one half travelling 0.1 of the bear's size).
    """
    flat = centres - (centres @ up)[:, None] * up
    travelled = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(flat, axis=0), axis=1))])
    middle = int(np.searchsorted(travelled, travelled[-1] / 2))

    def direction(points: np.ndarray) -> np.ndarray:
        frame = np.arange(len(points)) - (len(points) - 1) / 2
        return frame @ points

    a, b = direction(flat[:middle + 1]), direction(flat[middle:])
    shortest = float(min(np.linalg.norm(flat[middle] - flat[0]), np.linalg.norm(flat[-1] - flat[middle])))
    if np.linalg.norm(a) * np.linalg.norm(b) < 1e-12:
        return 0.0, shortest
    return 2.0 * math.atan2(float(np.cross(a, b) @ up), float(a @ b)), shortest


def _headings(rots: np.ndarray, centres: np.ndarray, up: np.ndarray, path: float) -> np.ndarray:
    """Unit horizontal heading per frame: the first quarter's travel direction, carried by the rotation.

    A rigid object's front is not visible in the geometry, so the heading frame
    takes the direction it sets off in as its front; "forwards" thus means
    "keeps going the way it started", and a turn carries the front round with it.
    """
    T = len(centres)
    progress = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(centres, axis=0), axis=1))])
    k = int(np.searchsorted(progress, 0.25 * path)) if path > 0 else 0
    start = centres[min(max(k, 1), T - 1)] - centres[0]
    start -= (start @ up) * up
    if np.linalg.norm(start) < 1e-9:
        return np.zeros((T, 3))
    front = rots[0].T @ (start / np.linalg.norm(start))  # in the reference frame's body axes
    heads = np.einsum("tij,j->ti", rots, front)
    heads -= (heads @ up)[:, None] * up
    return heads / np.maximum(np.linalg.norm(heads, axis=1, keepdims=True), 1e-9)


def heading_offset_deg(leader: ObjectTrack, follower: ObjectTrack, up: np.ndarray) -> float:
    """Signed angle (degrees, + = to the left) from the leader's net travel to the follower's."""
    a = leader.centres[-1] - leader.centres[0]
    b = follower.centres[-1] - follower.centres[0]
    a, b = a - (a @ up) * up, b - (b @ up) * up
    return math.degrees(math.atan2(float(np.cross(a, b) @ up), float(a @ b)))


def global_frame(scene, data) -> tuple[np.ndarray | None, str]:
    """The docs/design.md global camera's viewmat, or None and why not."""
    try:
        from recon4d.render.cameras import global_camera
    except ImportError:
        return None, "recon4d.render.cameras.global_camera is not built yet"
    viewmat, _ = global_camera(scene, data)
    return np.asarray(viewmat, dtype=np.float64), "global camera"


@dataclass
class SceneTracks:
    """Everything the describer and the answerer read: objects, their tracks and the frames of reference."""

    tracks: list[ObjectTrack]
    up: np.ndarray
    up_source: str
    viewmats: np.ndarray  # [T, 4, 4] input cameras (world-to-camera)
    global_viewmat: np.ndarray | None
    global_note: str
    instances_from: str

    @property
    def pitch_known(self) -> bool:
        """Whether ``up`` is the world's (a ground plane, the priors) rather than the first camera's guess."""
        return self.up_source != UP_GUESSED

    def window(self, lo: int, hi: int) -> SceneTracks:
        """The scene over frames ``lo:hi``: every track and the cameras cut to that window."""
        viewmats = self.viewmats[lo:hi]
        return SceneTracks([t.window(lo, hi, self.viewmats, self.up) for t in self.tracks], self.up, self.up_source,
                           viewmats, self.global_viewmat, self.global_note, self.instances_from)


def load_tracks(scene_dir, masks=None) -> SceneTracks:
    """Fit-side trajectories of every object in the fitted scene at ``scene_dir`` (no ground truth read).

    A folder without ``model/scene.json`` is a MissingStageError that says what to run.
    """
    import torch

    from recon4d.grounding.objects import find_objects
    from recon4d.priors.depth import from_sparse_fallback
    from recon4d.scene.data import load_scene_data
    from recon4d.scene.state import load_scene
    from recon4d.scene_folder import MissingStageError, SceneFolder

    scene_dir = Path(scene_dir)
    folder = SceneFolder(scene_dir)
    if not folder.model_meta.is_file():
        source = folder.frames_info().get("source", "<input>")
        raise MissingStageError(f"{scene_dir} is not a fitted scene (no model/scene.json); fit it first with "
                                f"`recon4d fit --video {source} --out {scene_dir.parent} --name {scene_dir.name}`")
    scene, _, _ = load_scene(folder.model)
    data = load_scene_data(scene_dir)
    ref = int(getattr(scene, "reference_frame", 0))
    with torch.no_grad():
        dyn = np.stack([scene.at(t, include_static=False).means.numpy() for t in range(scene.frames)]).astype(np.float64)
        static = scene.static.means.numpy().astype(np.float64)
        opacities = scene.dynamic.opacities.numpy().reshape(-1).astype(np.float64)
    viewmats = data.viewmats.numpy().astype(np.float64)
    if getattr(data, "world_up", None) is not None:
        up, up_source = data.world_up.numpy().astype(np.float64), "priors"
        up /= np.linalg.norm(up)
    else:
        up, up_source = estimate_up(static, viewmats[0])
    depth_evidence = not from_sparse_fallback(np.load(folder.depth))
    objects, how = find_objects(scene, data, scene_dir, dyn, up, masks, pitch_known=up_source != UP_GUESSED,
                                depth_evidence=depth_evidence)
    K = data.K.numpy().astype(np.float64)
    tracks = [track_object(o, dyn, opacities, ref, viewmats, up,
                           observed_frames(dyn[:, o.gaussians], K, viewmats, data.width, data.height), depth_evidence)
              for o in objects]
    global_viewmat, note = global_frame(scene, data)
    return SceneTracks(tracks, up, up_source, viewmats, global_viewmat, note, how)
