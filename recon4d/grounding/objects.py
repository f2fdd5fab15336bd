"""Object instances of a fitted scene: which dynamic Gaussians move together, and what they look like.

Why: every grounded answer ("is the red cube turning left?") needs the set of
Gaussians that make up one object. Where the input comes with instance id masks
(DAVIS ``Annotations/``, the id masks a ``recon4d synth`` scene ships as its
segmentation input) each dynamic Gaussian is assigned by projecting it into the
masks of every frame and taking the majority id; otherwise the scaffold nodes are
clustered by how far apart they ever get (single linkage), so that two objects
that touch in one frame but separate later stay two.

Appearance is estimated from the fit only: a colour word from the hue of the
object's Gaussians and a coarse shape (cube, ball, cylinder) from how well its
canonical points fit each primitive. Nothing here reads ground truth.
"""

from __future__ import annotations

import colorsys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from recon4d.fit.data import frames_info

MIN_SHARE = 0.03  # instances with fewer than this share of the dynamic Gaussians are noise
MIN_GAUSSIANS = 8
# Basic colour words and their hues in degrees; shading changes value, not hue.
HUES = {"red": 0.0, "orange": 28.0, "yellow": 52.0, "green": 125.0, "cyan": 185.0, "blue": 228.0, "purple": 283.0}
PLANES = 5  # a cube shows at most five faces over a clip (four sides and the top when it spins)
# Five planes hold 0.86-0.96 of a fitted cube's points and 0.67-0.78 of a ball's (9 fitted tiny
# synth scenes, moving and spinning); no fitted cylinder has been measured, so none is named.
CUBE_COVER = 0.82


@dataclass
class ObjectInstance:
    """One moving object: its dynamic Gaussians (indices into ``scene.dynamic``) and looks."""

    index: int  # 1-based, in order of the mask id or cluster size
    gaussians: np.ndarray  # int indices into the dynamic Gaussian set
    mask_id: int | None = None
    rgb: tuple[float, float, float] = (0.0, 0.0, 0.0)
    colour: str | None = None
    shape: str | None = None
    shape_fit: dict = field(default_factory=dict)  # the measures the shape word came from

    @property
    def label(self) -> str:
        words = [w for w in (self.colour, self.shape) if w]
        return " ".join(words) if len(words) == 2 else f"object {self.index}"


def mask_source(scene_dir: Path) -> Path | None:
    """The ``Annotations/`` folder of the scene's input, if it has one (frames.json ``source``)."""
    scene_dir = Path(scene_dir)
    info = frames_info(scene_dir)
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
                    image_size: tuple[int, int]) -> np.ndarray:
    """Majority mask id of each dynamic Gaussian over all frames (``tracks`` ``[T, N, 3]`` world)."""
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
    return votes.argmax(1)


def cluster_nodes(node_tracks: np.ndarray, node_of_gaussian: np.ndarray) -> np.ndarray:
    """Cluster label per Gaussian from single-linkage clustering of node trajectories ``[T, M, 3]``.

    Two nodes link when their largest distance over the clip is below three times the
    median nearest-neighbour spacing; labels are 1-based, 0 for nodes no Gaussian uses.
    """
    used = np.unique(node_of_gaussian)
    pts = node_tracks[:, used]  # [T, U, 3]
    far = np.zeros((len(used), len(used)))
    for t in range(len(pts)):
        far = np.maximum(far, np.linalg.norm(pts[t, :, None] - pts[t, None], axis=-1))
    spacing = np.median(np.sort(far + np.eye(len(used)) * 1e9, 1)[:, 0]) if len(used) > 1 else 1.0
    link = far < 3.0 * spacing
    label = np.zeros(len(used), np.int64)
    for seed in range(len(used)):
        if label[seed]:
            continue
        label[seed] = label.max() + 1
        stack = [seed]
        while stack:
            i = stack.pop()
            for j in np.nonzero(link[i] & (label == 0))[0]:
                label[j] = label[seed]
                stack.append(j)
    per_node = np.zeros(node_tracks.shape[1], np.int64)
    per_node[used] = label
    return per_node[node_of_gaussian]


def colour_word(rgb: np.ndarray) -> str:
    """Nearest basic colour word by hue; low saturation gives white, grey or black."""
    h, s, v = colorsys.rgb_to_hsv(*np.clip(rgb, 0, 1))
    if s < 0.25:
        return "white" if v > 0.8 else ("black" if v < 0.2 else "grey")
    hue = h * 360.0
    return min(HUES, key=lambda name: min(abs(hue - HUES[name]), 360 - abs(hue - HUES[name])))


def shape_measures(points: np.ndarray, seed: int = 0) -> dict[str, float]:
    """How flat-faced the object's surface is: the share of its points on its best few planes.

    Monocular fits cover only the visible side, at a few pixels per Gaussian, so
    fitting full primitives is unreliable; what survives is whether the visible
    surface is made of flat faces: a cube's points lie on a few planes, a ball's do not.
    Planes are found one after another by RANSAC, inliers within 6% of the object size.
    """
    c = points - points.mean(0)
    size = float(np.sqrt((c**2).sum(1).mean())) + 1e-9
    rng = np.random.default_rng(seed)
    left = np.ones(len(c), bool)
    for _ in range(PLANES):
        idx = np.nonzero(left)[0]
        if len(idx) < 3:
            break
        best = np.zeros(len(c), bool)
        for _ in range(300):
            a, b, d = c[rng.choice(idx, 3, replace=False)]
            n = np.cross(b - a, d - a)
            if np.linalg.norm(n) < 1e-12:
                continue
            inliers = left & (np.abs((c - a) @ (n / np.linalg.norm(n))) < 0.06 * size)
            if inliers.sum() > best.sum():
                best = inliers
        left &= ~best
    return {"plane_cover": float(1.0 - left.mean())}


def shape_word(measures: dict[str, float]) -> str:
    """Cube or ball from :func:`shape_measures` (cut-off between the measured ranges of fitted scenes)."""
    return "cube" if measures["plane_cover"] >= CUBE_COVER else "ball"


def describe_looks(obj: ObjectInstance, colours: np.ndarray, opacities: np.ndarray, canon: np.ndarray) -> None:
    """Fill in colour and shape of ``obj`` from its Gaussians' colours and canonical means."""
    w = opacities[obj.gaussians]
    rgb = np.array([_weighted_median(colours[obj.gaussians, k], w) for k in range(3)])
    obj.rgb = tuple(float(x) for x in rgb)
    obj.colour = colour_word(rgb)
    keep = w > 0.3 if (w > 0.3).sum() >= MIN_GAUSSIANS else np.ones_like(w, bool)
    obj.shape_fit = shape_measures(canon[obj.gaussians[keep]])
    obj.shape = shape_word(obj.shape_fit)


def _weighted_median(x: np.ndarray, w: np.ndarray) -> float:
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cum, cum[-1] / 2)])


def find_objects(scene, data, scene_dir: Path, tracks: np.ndarray,
                 masks: Path | None = None) -> tuple[list[ObjectInstance], str]:
    """Instances of the fitted scene and how they were found ("id masks at <path>" or "scaffold clusters").

    ``tracks`` are the dynamic Gaussian means per frame ``[T, N, 3]``.
    """
    info = frames_info(scene_dir)
    folder = masks or mask_source(scene_dir)
    if folder is not None:
        ids = assign_by_masks(tracks, data.K.numpy(), data.viewmats.numpy(),
                              read_id_masks(folder, info.get("indices", list(range(data.frames)))),
                              (data.width, data.height))
        how = f"id masks at {folder}"
    else:
        weights = scene.binding.weights().detach().numpy()
        nodes = scene.binding.node_ids.numpy()[np.arange(len(weights)), weights.argmax(1)]
        with torch.no_grad():
            node_tracks = scene.scaffold.node_positions().numpy()
        ids = cluster_nodes(node_tracks, nodes)
        how = "scaffold clusters"
    ref = scene.reference_frame if hasattr(scene, "reference_frame") else 0
    colours = scene.dynamic.colors.detach().numpy()
    opacities = scene.dynamic.opacities.detach().numpy().reshape(-1)
    labels, counts = np.unique(ids[ids > 0], return_counts=True)
    order = labels[np.argsort(-counts, kind="stable")] if folder is None else labels
    objects = []
    for label in order:
        members = np.nonzero(ids == label)[0]
        if len(members) < max(MIN_GAUSSIANS, MIN_SHARE * len(ids)):
            continue
        obj = ObjectInstance(len(objects) + 1, members, mask_id=int(label) if folder is not None else None)
        describe_looks(obj, colours, opacities, tracks[ref])
        objects.append(obj)
    return objects, how
