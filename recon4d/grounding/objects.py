"""Object instances of a fitted scene: which dynamic Gaussians move together, and what they look like.

Why: every grounded answer ("is the red cube turning left?") needs the set of
Gaussians that make up one object. Where the input comes with instance id masks
(DAVIS ``Annotations/``, the id masks a ``recon4d synth`` scene ships as its
segmentation input) each dynamic Gaussian is assigned by projecting it into the
masks of every frame and taking the majority id (``assign_annotated``: an object that wins
no Gaussian that way takes those that follow it part-time). Without them the priors' motion
masks stand in (``recon4d.grounding.motion_instances``: their regions chained over
the frames). Why not clusters of the scaffold's nodes, as before: on real clips one
subject fell apart into many of them (docs/decisions.md).

Appearance: a colour word from the hue of the object's Gaussians, and, where
the input has id masks, a shape word (ball, cube, cylinder) from the object's
silhouettes in them (``recon4d.grounding.shape``, which says why not from the
fit); the shape stays unknown (None) with motion masks or when the silhouettes do
not decide it. Each object also gets its centre and apparent size per frame as the
input shows it (``recon4d.grounding.seen``, which says why not from the fit);
its trajectory follows that centre. Nothing here reads ground truth.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from recon4d.geometry import camera_centres
from recon4d.grounding.motion_instances import motion_instances
from recon4d.grounding.seen import rendered_depth, seen_centres, seen_sizes, seen_spin, visible_sizes
from recon4d.grounding.shape import estimate_shape
from recon4d.scene_folder import SceneFolder

MIN_SHARE = 0.03  # instances with fewer than this share of the dynamic Gaussians are noise
MIN_GAUSSIANS = 8
CAMERA_STILL = 0.05  # camera travel below this share of its distance to the scene: the camera does not move
# Motion masks miss much of a moving subject (recall 0.2-0.4 on several quick DAVIS fits), so a dynamic
# Gaussian belongs to a motion-mask object when it lands on it in this share of its in-view frames.
MOTION_MASK_INSIDE = 0.2
# Basic colour words and their hues in degrees; shading changes value, not hue.
HUES = {"red": 0.0, "orange": 28.0, "yellow": 52.0, "green": 125.0, "cyan": 185.0, "blue": 228.0, "purple": 283.0}


@dataclass
class ObjectInstance:
    """One moving object: its dynamic Gaussians (indices into ``scene.dynamic``) and looks."""

    index: int  # 1-based, in order of the mask id or cluster size
    gaussians: np.ndarray  # int indices into the dynamic Gaussian set
    mask_id: int | None = None
    rgb: tuple[float, float, float] = (0.0, 0.0, 0.0)
    colour: str | None = None
    shape: str | None = None  # "ball", "cube", "cylinder", or None when unknown
    shape_note: str = "no id masks"  # what the shape estimate rests on (votes), or why there is none
    label: str = ""  # how descriptions name it: "the red cube", or "object 2 (red cube)" when that repeats
    seen: np.ndarray | None = None  # [T, 3] world centre per frame as the input shows it (``seen.seen_centres``)
    seen_size: np.ndarray | None = None  # [T] apparent size per frame, NaN where cut (``seen.seen_sizes``)
    visible_size: np.ndarray | None = None  # [T] size of the part in view, a lower bound (``seen.visible_sizes``)
    seen_spin: np.ndarray | None = None  # [T-1] turn about the image's vertical per frame (``seen.seen_spin``)

    @property
    def looks(self) -> str:
        """Colour and shape words, "object" standing in for an unknown shape."""
        return f"{self.colour} {self.shape or 'object'}"


def mask_source(scene_dir: Path) -> Path | None:
    """The ``Annotations/`` folder of the scene's input, if it has one (frames.json ``source``)."""
    scene_dir = Path(scene_dir)
    info = SceneFolder(scene_dir).frames_info()
    source = Path(info.get("source", ""))
    for base in (source, Path.cwd() / source, scene_dir.parent / source, scene_dir.parent.parent / source):
        if (base / "Annotations").is_dir():
            return base / "Annotations"
    return None


def read_id_masks(folder: Path, indices: list[int]) -> np.ndarray:
    """Id masks ``[T, H, W]`` for the given source frame indices (colour PNGs reduced to one id each)."""
    files = sorted(folder.glob("*.png"))
    masks = []
    for i in indices:
        m = np.array(Image.open(files[i]))
        if m.ndim == 3:  # palette-less colour masks: one id per distinct colour
            flat = m[..., :3].reshape(-1, 3).astype(np.int64)
            key = flat[:, 0] * 65536 + flat[:, 1] * 256 + flat[:, 2]
            _, inv = np.unique(key, return_inverse=True)
            m = inv.reshape(m.shape[:2])
        masks.append(m.astype(np.int64))
    return np.stack(masks)


def assign_by_masks(tracks: np.ndarray, K: np.ndarray, viewmats: np.ndarray, masks: np.ndarray,
                    image_size: tuple[int, int], inside: float | None = None) -> np.ndarray:
    """Majority mask id of each dynamic Gaussian over all frames (``tracks`` ``[T, N, 3]`` world).

    ``inside``: masks that miss much of each object (motion masks) instead give a Gaussian the
    most frequent object id if it lands on that id in at least this share of its in-view frames.
    """
    return _assign(mask_votes(tracks, K, viewmats, masks, image_size), inside)


def mask_votes(tracks: np.ndarray, K: np.ndarray, viewmats: np.ndarray, masks: np.ndarray,
               image_size: tuple[int, int]) -> np.ndarray:
    """``[N, ids]``: in how many frames each dynamic Gaussian lands on each mask id."""
    T, N = tracks.shape[:2]
    Hm, Wm = masks.shape[1:]
    sx, sy = Wm / image_size[0], Hm / image_size[1]
    n_ids = int(masks.max()) + 1
    votes = np.zeros((N, n_ids), np.int64)
    for t in range(T):
        cam = tracks[t] @ viewmats[t, :3, :3].T + viewmats[t, :3, 3]
        uv = (cam @ K.T)[:, :2] / np.maximum(cam[:, 2:3], 1e-6)
        x = np.floor(uv[:, 0] * sx).astype(np.int64)
        y = np.floor(uv[:, 1] * sy).astype(np.int64)
        ok = (cam[:, 2] > 0) & (x >= 0) & (x < Wm) & (y >= 0) & (y < Hm)
        np.add.at(votes, (np.nonzero(ok)[0], masks[t, y[ok], x[ok]]), 1)
    return votes


def _assign(votes: np.ndarray, inside: float | None) -> np.ndarray:
    """Each Gaussian's id from its ``mask_votes`` (see ``assign_by_masks`` for ``inside``)."""
    if inside is None or votes.shape[1] < 2:
        return votes.argmax(1)
    best = votes[:, 1:].argmax(1) + 1
    return np.where(votes[:, 1:].max(1) >= inside * np.maximum(votes.sum(1), 1), best, 0)


def assign_annotated(tracks: np.ndarray, K: np.ndarray, viewmats: np.ndarray, masks: np.ndarray,
                     image_size: tuple[int, int]) -> np.ndarray:
    """Mask id of each dynamic Gaussian under annotated id masks: the majority id, and, for an id that wins
    too few Gaussians that way, the background-majority Gaussians that land on it often enough.

    Why: an annotated object is in the video whatever a fit made of it. A thin or fast subject (a runner
    fitted from 16 frames spread over 100) has dynamic Gaussians that follow it only part of the time and
    fall on the background in most frames, so the majority vote left no object at all (parkour,
    paragliding-launch) and every question about it read "not moving". Ids that win a majority keep
    exactly the Gaussians they win.
    """
    votes = mask_votes(tracks, K, viewmats, masks, image_size)  # projected once for both readings
    ids, loose = _assign(votes, None), _assign(votes, MOTION_MASK_INSIDE)
    for label in np.unique(loose[loose > 0]):
        if np.count_nonzero(ids == label) < max(MIN_GAUSSIANS, MIN_SHARE * len(ids)):
            ids[(ids == 0) & (loose == label)] = label
    return ids


def colour_word(rgb: np.ndarray) -> str:
    """Nearest basic colour word by hue; low saturation gives white, grey or black."""
    h, s, v = colorsys.rgb_to_hsv(*np.clip(rgb, 0, 1))
    if s < 0.25:
        return "white" if v > 0.8 else ("black" if v < 0.2 else "grey")
    hue = h * 360.0
    return min(HUES, key=lambda name: min(abs(hue - HUES[name]), 360 - abs(hue - HUES[name])))


def describe_colour(obj: ObjectInstance, colours: np.ndarray, opacities: np.ndarray) -> None:
    """Fill in the colour of ``obj``: opacity-weighted median RGB of its Gaussians and its word."""
    w = opacities[obj.gaussians]
    rgb = np.array([_weighted_median(colours[obj.gaussians, k], w) for k in range(3)])
    obj.rgb = tuple(float(x) for x in rgb)
    obj.colour = colour_word(rgb)


def _weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cum, cum[-1] / 2)])


def camera_still(viewmats: np.ndarray, depths: dict[int, np.ndarray]) -> bool:
    """Whether the cameras' centres stay within ``CAMERA_STILL`` of the median distance to the objects (``depths``,
    ``mask_depths``): a still or only turning camera."""
    distances = np.concatenate([d for label, d in depths.items() if label > 0] or [np.zeros(0)])
    distances = distances[np.isfinite(distances) & (distances > 0)]
    if not len(distances):
        return False
    eyes = camera_centres(viewmats)
    return bool(np.linalg.norm(eyes - eyes[0], axis=1).max() < CAMERA_STILL * float(np.median(distances)))


def mask_depths(tracks: np.ndarray, ids: np.ndarray, viewmats: np.ndarray) -> dict[int, np.ndarray]:
    """Camera depth per frame ``[T]`` of each mask id's Gaussians (their centroid), for occlusion order."""
    out = {}
    for label in np.unique(ids):
        centre = tracks[:, ids == label].mean(1)  # [T, 3]
        out[int(label)] = np.einsum("tj,tj->t", viewmats[:, 2, :3], centre) + viewmats[:, 2, 3]
    return out


def find_objects(scene, data, scene_dir: Path, tracks: np.ndarray, up: np.ndarray,
                 masks: Path | None = None, pitch_known: bool = True,
                 depth_evidence: bool = True) -> tuple[list[ObjectInstance], str]:
    """Instances of the fitted scene and how they were found ("id masks at <path>" or "the priors' motion masks").

    ``tracks`` are the dynamic Gaussian means per frame ``[T, N, 3]``; ``up`` is the
    world's unit up vector (the shape test looks at silhouettes upright; ``pitch_known`` false when it
    is the first camera's guess); ``data``
    the scene data (``load_scene_data``), whose dynamic mask stands in for id masks. ``depth_evidence``
    false: the depth prior gave moving objects no depth of their own (``ObjectTrack.depth_evidence``).
    """
    folder = masks or mask_source(scene_dir)
    K, viewmats = data.K.numpy().astype(np.float64), data.viewmats.numpy().astype(np.float64)
    if folder is not None:
        id_masks = read_id_masks(folder, SceneFolder(scene_dir).frames_info().get("indices", list(range(data.frames))))
        how = f"id masks at {folder}"
    else:
        id_masks = motion_instances(data.dynamic_mask.numpy())
        how = "the priors' motion masks"
    if folder is None:
        ids = assign_by_masks(tracks, K, viewmats, id_masks, (data.width, data.height), MOTION_MASK_INSIDE)
    else:
        ids = assign_annotated(tracks, K, viewmats, id_masks, (data.width, data.height))
    mask_K = np.diag([id_masks.shape[2] / data.width, id_masks.shape[1] / data.height, 1.0]) @ K
    depths = mask_depths(tracks, ids, viewmats)
    fitted_depth = rendered_depth(scene, data)  # rendered at the input resolution: intrinsics K
    # A depth prior that gives a moving object no distance of its own (a constant one, or the offline sparse
    # depth's, the surrounding surface's) leaves its distance to its outline's size: an annotated outline's, or
    # a motion mask's (the moving pixels', not quite the object's, but still the object's own evidence)
    constant = bool(data.depth.max() - data.depth.min() <= 1e-6 * data.depth.max())
    size_depth = constant or not depth_evidence
    # A still camera's motion masks outline its moving objects; a moving camera's are what the epipolar and
    # residual tests leave of them (synth from video, seeds 11+27: shapes read from motion masks win 8
    # answers on a still camera and 2 on a panning one, and lose 2 on a dolly and 3 on an orbit)
    outlines = folder is not None or camera_still(viewmats, depths)
    flow_file = SceneFolder(scene_dir).flow
    flow = np.load(flow_file)["forward"] if flow_file.is_file() else None
    colours = scene.dynamic.colors.detach().numpy()
    opacities = scene.dynamic.opacities.detach().numpy().reshape(-1)
    objects = []
    for label in np.unique(ids[ids > 0]):
        members = np.nonzero(ids == label)[0]
        if len(members) < max(MIN_GAUSSIANS, MIN_SHARE * len(ids)):
            continue
        obj = ObjectInstance(len(objects) + 1, members, mask_id=int(label))
        describe_colour(obj, colours, opacities)
        if outlines:
            obj.shape, obj.shape_note = estimate_shape(id_masks, obj.mask_id, mask_K, viewmats, up, depths,
                                                        pitch_known)
        else:
            obj.shape_note = "motion masks under a moving camera: outlines not trusted for a shape"
        obj.seen = seen_centres(id_masks, obj.mask_id, K, viewmats, fitted_depth, depths, size_depth)
        obj.seen_size = seen_sizes(id_masks, obj.mask_id, depths)
        obj.visible_size = visible_sizes(id_masks, obj.mask_id)
        obj.seen_spin = None if flow is None else seen_spin(id_masks, obj.mask_id, flow)
        objects.append(obj)
    for obj in objects:
        same = sum(o.looks == obj.looks for o in objects)
        obj.label = f"the {obj.looks}" if same == 1 else f"object {obj.index} ({obj.looks})"
    return objects, how
