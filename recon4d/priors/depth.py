"""Per-frame depth: providers behind one ``estimate`` call, and scale/shift alignment to the camera.

Why several providers: a learned monocular model (Depth Anything V2) gives the
best relative depth but needs weights; RGB-D phones give real depth; synth
scenes have ground truth (for ablations of later stages); and a machine with no
weights still needs *some* depth. Every provider returns ``(values [T,H,W],
kind)`` with kind ``"depth"`` (camera z, any scale) or ``"disparity"`` (affine
inverse depth, what Depth Anything predicts). :func:`align` then fits one scale
and shift per frame, in the provider's own space, to the depths of the
triangulated static tracks, so every depth map ends up in the camera's units.

The fallback (:class:`SparseDepth`) is sparse-to-dense: the camera solve's
static points, projected into each frame, interpolated over the image. It is
only as good as the tracks: right at track positions, smooth in between, with
no depth edges and object depth borrowed from the ground around them (once the
dynamic masks exist, :func:`objects_at_contact_depth` moves each moving region
to the near side of its surroundings); a static camera triangulates nothing and
gets a constant depth.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np
from tqdm import tqdm

FALLBACK_WARNING = (
    "depth: no learned depth model available locally; using the offline fallback (triangulated track depth "
    "interpolated between tracks). Expect coarse depth: correct at tracked points, smooth in between, no sharp "
    "object edges, constant depth for a static camera. Pass --depth-model DIR with Depth Anything V2 weights, "
    "--depth da-v2 to download them, or --depth PATH with depth files for better depth."
)


@dataclass(frozen=True)
class DepthAnythingV2:
    """Depth Anything V2 through ``transformers``: a local directory, or a hub id in the local HF cache;
    with ``download`` (the user asked for this model: ``--depth da-v2``) a hub id may also be fetched."""

    model: str = "depth-anything/Depth-Anything-V2-Small-hf"
    download: bool = False
    batch: int = 4
    name: str = "depth-anything-v2"
    kind: str = "disparity"

    def available(self) -> bool:
        """True when the weights are on this machine, or may be downloaded (no download is attempted here)."""
        if Path(self.model).is_dir():
            return (Path(self.model) / "config.json").exists()
        if self.download:
            return True
        try:
            from huggingface_hub import try_to_load_from_cache

            return isinstance(try_to_load_from_cache(self.model, "config.json"), str)
        except (ImportError, ValueError):  # ValueError: not a valid hub id either (e.g. a missing local path)
            return False

    def load(self):
        """(processor or None, model), offline unless ``download``; processor is None for a bare config directory."""
        from transformers import AutoImageProcessor, AutoModelForDepthEstimation

        offline = not self.download
        try:
            model = AutoModelForDepthEstimation.from_pretrained(self.model, local_files_only=offline).eval()
        except OSError as exc:
            why = "not in the local cache" if offline else "not local, and not downloadable from the hub"
            raise FileNotFoundError(f"Depth Anything V2 {self.model!r} could not be loaded ({why}); "
                                    "pass --depth-model DIR with downloaded weights") from exc
        try:
            proc = AutoImageProcessor.from_pretrained(self.model, local_files_only=offline)
        except OSError:
            proc = None
        return proc, model

    def estimate(self, frames: np.ndarray, progress: bool = True) -> tuple[np.ndarray, str]:
        import torch

        proc, model = self.load()
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")  # the GPU when there is one
        model = model.to(device)
        T, H, W = frames.shape[:3]
        out = np.empty((T, H, W), np.float32)
        for i in tqdm(range(0, T, self.batch), desc="depth (DA-V2)", disable=not progress, leave=False):
            x = _preprocess(frames[i:i + self.batch], proc).to(device)
            with torch.no_grad():
                pred = model(pixel_values=x).predicted_depth
            pred = torch.nn.functional.interpolate(pred[:, None], size=(H, W), mode="bilinear", align_corners=False)
            out[i:i + len(x)] = pred[:, 0].cpu().numpy()
        return out, self.kind


def _preprocess(frames: np.ndarray, proc):
    """Pixel values for the model: the checkpoint's processor, or (no processor) 518-multiple-of-14 ImageNet norm."""
    import torch

    if proc is not None:
        return proc(images=list(frames), return_tensors="pt")["pixel_values"]
    H, W = frames.shape[1:3]
    s = 518 / max(H, W)
    size = (max(14, round(W * s / 14) * 14), max(14, round(H * s / 14) * 14))
    x = np.stack([cv2.resize(f, size, interpolation=cv2.INTER_CUBIC) for f in frames]).astype(np.float32) / 255
    x = (x - [0.485, 0.456, 0.406]) / [0.229, 0.224, 0.225]
    return torch.from_numpy(x.transpose(0, 3, 1, 2).astype(np.float32))


@dataclass(frozen=True)
class UserDepth:
    """Depth files from the user, one per frame in name order: ``.npy`` (metres), 16-bit ``.png``
    (millimetres, as RGB-D phones and TUM/ScanNet write them) or ``.exr`` (metres)."""

    path: str
    png_scale: float = 1000.0
    name: str = "files"
    kind: str = "depth"

    def estimate(self, frames: np.ndarray, indices: list[int] | None = None, progress: bool = True):
        files = sorted(p for p in Path(self.path).iterdir() if p.suffix.lower() in {".npy", ".png", ".exr"})
        T, H, W = frames.shape[:3]
        indices = indices if indices is not None else list(range(T))
        if len(files) <= max(indices):
            raise ValueError(f"depth folder {self.path} has {len(files)} files; frame {max(indices)} needs more")
        out = np.empty((T, H, W), np.float32)
        for n, i in enumerate(indices):
            d = _read_depth(files[i], self.png_scale)
            out[n] = cv2.resize(d, (W, H), interpolation=cv2.INTER_NEAREST) if d.shape != (H, W) else d
        return out, self.kind


def _read_depth(f: Path, png_scale: float) -> np.ndarray:
    if f.suffix.lower() == ".npy":
        return np.load(f).astype(np.float32)
    if f.suffix.lower() == ".exr":
        os.environ.setdefault("OPENCV_IO_ENABLE_OPENEXR", "1")
    d = cv2.imread(str(f), cv2.IMREAD_ANYDEPTH | cv2.IMREAD_UNCHANGED)
    if d is None:
        raise ValueError(f"cannot read depth file {f}")
    d = d[..., 0] if d.ndim == 3 else d
    return d.astype(np.float32) / (png_scale if f.suffix.lower() == ".png" else 1.0)


@dataclass(frozen=True)
class SynthGTDepth:
    """Ground-truth depth of a ``recon4d synth`` scene (ablations and tests of later stages only)."""

    folder: str
    name: str = "gt"
    kind: str = "depth"

    def estimate(self, frames: np.ndarray, indices: list[int], progress: bool = True):
        d = np.load(Path(self.folder) / "gt" / "depth.npz")["depth"][indices]
        T, H, W = frames.shape[:3]
        if d.shape[1:] != (H, W):
            d = np.stack([cv2.resize(x, (W, H), interpolation=cv2.INTER_AREA) for x in d])
        return d.astype(np.float32), self.kind


@dataclass(frozen=True)
class SparseDepth:
    """Offline fallback: interpolate the depth of triangulated static points in each frame."""

    name: str = "sparse-fallback"
    kind: str = "depth"

    min_views: int = 3
    """Points of tracks seen in fewer frames are left out. Why: two views give a triangulation no
    reprojection check (four equations, three unknowns), so a track that is not static (on a moving
    object's edge) lifts to any depth; one such point on DAVIS horsejump-high, seen in 2 frames at a
    tenth of the scene's depth, pulled the horse's depth in frames 4-10 to 0.1 from 0.8 (a near point
    weighs the most in inverse depth)."""

    def estimate(self, frames: np.ndarray, K: np.ndarray, viewmats: np.ndarray, points: np.ndarray,
                 xy: np.ndarray, vis: np.ndarray, progress: bool = True):
        return sparse_depth(frames.shape[:3], viewmats, points, xy, vis, progress, self.min_views), self.kind


def from_sparse_fallback(depth_file) -> bool:
    """Whether a saved depth file (``np.load`` of the priors' depth.npz) came from :class:`SparseDepth`: moving
    objects there have the depth of the static surface around them, not their own."""
    return "provider" in depth_file.files and str(depth_file["provider"]) == SparseDepth.name


def sparse_depth(shape: tuple[int, int, int], viewmats: np.ndarray, points: np.ndarray,
                 xy: np.ndarray, vis: np.ndarray, progress: bool = False, min_views: int = 2) -> np.ndarray:
    """``[T, H, W]`` depth interpolated between the world ``points [P, 3]`` of the tracks seen in each frame
    (all points where a frame sees fewer than 4); a frame with fewer than 4 points in front of it takes the
    depth of the nearest frame that has them; constant 1 when no frame has. Only the points of tracks seen
    in at least ``min_views`` frames, when 4 or more are."""
    T, H, W = shape
    ok = np.isfinite(points).all(1)
    seen_enough = ok & (vis.sum(0) >= min_views)
    if seen_enough.sum() >= 4:
        ok = seen_enough
    out = np.ones((T, H, W), np.float32)
    if ok.sum() < 4:
        warnings.warn("depth: no triangulated points (static camera?): fallback depth is constant", stacklevel=2)
        return out
    # interpolate on a grid 4x coarser (the result is smooth anyway), then upsample: 16x fewer queries
    h, w = max(2, H // 4), max(2, W // 4)
    gy, gx = (np.mgrid[0:h, 0:w] + 0.5) * [[[H / h]], [[W / w]]]
    solved = np.zeros(T, bool)
    for t in tqdm(range(T), desc="depth (sparse)", disable=not progress, leave=False):
        sel = ok & vis[t]
        if sel.sum() < 4:
            sel = ok
        cam = points[sel] @ viewmats[t, :3, :3].T + viewmats[t, :3, 3]
        z = cam[:, 2]
        front = z > 1e-6
        if front.sum() < 4:
            continue
        uv = xy[t, sel][front]
        inv = 1.0 / z[front]
        # interpolate inverse depth (far points have little weight); nearest outside the hull
        inv_map = cv2.resize(interpolate(uv, inv, gx, gy).astype(np.float32), (W, H), interpolation=cv2.INTER_LINEAR)
        out[t] = 1.0 / np.maximum(inv_map, 1e-6)
        solved[t] = True
    if not solved.any():
        warnings.warn("depth: no frame sees 4 triangulated points in front of it: fallback depth is constant",
                      stacklevel=2)
        return np.ones((T, H, W), np.float32)
    have = np.flatnonzero(solved)
    for t in np.flatnonzero(~solved):
        out[t] = out[have[np.abs(have - t).argmin()]]
    return out


CONTACT_RING_PX = 5  # width of the band of static pixels around a moving region that it borrows its depth from
CONTACT_QUANTILE = 5.0  # percentile of that band's depth taken: its near side, where the object stands
CONTACT_WINDOW = 4  # frames either side whose depths of the same moving region are pooled (a median)
CONTACT_MATCH = 0.05  # how far, in image widths, a region may move from a frame to a nearby one and still match


def objects_at_contact_depth(depth: np.ndarray, dynamic: np.ndarray) -> np.ndarray:
    """Fallback depth ``[T,H,W]`` with each moving region set to the depth of the nearest static surface around it.

    Why: the fallback interpolates static tracks, so a moving region takes the
    depth of whatever surrounds it, the far trees behind a jumping horse as much
    as the ground under it; the fit then lifts the object as far as the
    background, where static Gaussians from other frames hide it
    (docs/decisions.md). An object stands in front of what is
    around it and on what is below it, so each connected region of ``dynamic``
    gets one depth: the near end (``CONTACT_QUANTILE``) of the static depths in
    a ``CONTACT_RING_PX`` band around it. Flat, like the rest of the fallback.

    Then the median of that depth over the same region in the ``CONTACT_WINDOW`` frames
    either side (in each, the region most overlapping this one grown by ``CONTACT_MATCH``).
    Why: one frame's band can hold a few near static points that the next frame's does not
    (a railing, a track lifted wrong), and its region's depth then jumps: DAVIS horsejump-high's
    horse went 0.80 -> 0.14 -> 0.80 over three frames, parkour's runner 0.54 -> 0.39 -> 1.19 ->
    2.10 at a steady size. The fit's motion stage pulls each frame's object to that depth, so the
    jump became a leap along the line of sight, and the object left its mask in those frames.
    """
    T, H, W = depth.shape
    band = np.ones((2 * CONTACT_RING_PX + 1,) * 2, np.uint8)
    reach = max(1, round(CONTACT_MATCH * W))
    grow = np.ones((2 * reach + 1,) * 2, np.uint8)
    labels = [cv2.connectedComponents(dynamic[t].astype(np.uint8))[1] for t in range(T)]
    contact = []  # per frame: the depth of each region (label - 1), nan where its band has no depth
    for t in range(T):
        own = []
        for region in range(1, labels[t].max() + 1):
            ring = cv2.dilate((labels[t] == region).astype(np.uint8), band).astype(bool) & ~dynamic[t]
            z = depth[t][ring]
            z = z[z > 0]
            own.append(np.percentile(z, CONTACT_QUANTILE) if len(z) else np.nan)
        contact.append(np.array(own))
    out = depth.copy()
    for t in range(T):
        for region in range(1, labels[t].max() + 1):
            inside = labels[t] == region
            near = cv2.dilate(inside.astype(np.uint8), grow).astype(bool)
            pooled = [contact[t][region - 1]]
            for s in range(max(0, t - CONTACT_WINDOW), min(T, t + CONTACT_WINDOW + 1)):
                overlap = np.bincount(labels[s][near], minlength=len(contact[s]) + 1)[1:]
                if s != t and overlap.any():
                    pooled.append(contact[s][overlap.argmax()])
            pooled = np.array(pooled)
            if np.isfinite(pooled).any():
                out[t][inside] = np.nanmedian(pooled)
    return out


def interpolate(uv: np.ndarray, values: np.ndarray, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    """Piecewise-linear interpolation of scattered ``values`` at ``uv [N, 2]`` on the grid ``(gx, gy)``
    (Delaunay triangles), nearest value outside their hull.

    Why not ``scipy.interpolate.griddata``: its point location (``Delaunay.find_simplex``) takes from
    milliseconds to seconds per call on the same kind of input here (scipy 1.17); drawing each
    triangle's index into an image with OpenCV and solving barycentric weights per cell is steady.
    """
    from scipy.spatial import Delaunay, cKDTree

    h, w = gx.shape
    near = values[cKDTree(uv).query(np.stack([gx.ravel(), gy.ravel()], 1))[1]].reshape(h, w)
    try:
        dt = Delaunay(uv)
    except Exception:  # fewer than 3 points, or all on a line: no triangle to interpolate in
        return near
    # grid units: cell (i, j) is centred at (gx[i, j], gy[i, j]) on a regular grid
    x0, y0 = gx[0, 0], gy[0, 0]
    sx, sy = (gx[0, -1] - x0) / max(w - 1, 1), (gy[-1, 0] - y0) / max(h - 1, 1)
    q = np.stack([(uv[:, 0] - x0) / sx, (uv[:, 1] - y0) / sy], 1)
    index = np.full((h, w), -1, np.int32)
    shift = 4  # sub-cell vertex precision for fillConvexPoly
    for k, c in enumerate(np.round(q[dt.simplices] * (1 << shift)).astype(np.int32)):
        cv2.fillConvexPoly(index, c, k, lineType=cv2.LINE_8, shift=shift)
    inside = index >= 0
    cell = np.argwhere(inside)[:, ::-1].astype(np.float64)  # (x, y) in grid units
    tri = index[inside]
    lam = _barycentric(q, dt.simplices[tri], cell)
    # drawing is inclusive, so a cell near an edge may hold a triangle beside the one containing it:
    # walk across the edge opposite the most negative weight (a few steps suffice)
    for _ in range(8):
        bad = np.flatnonzero(lam.min(1) < -1e-9)
        if not len(bad):
            break
        alt = dt.neighbors[tri[bad], lam[bad].argmin(1)]
        ok = alt >= 0  # -1: the hull's edge, the cell is outside
        bad, alt = bad[ok], alt[ok]
        tri[bad], lam[bad] = alt, _barycentric(q, dt.simplices[alt], cell[bad])
    lam = np.clip(lam, 0, None)  # cells just outside the hull: the nearest point of their triangle
    lam /= lam.sum(1, keepdims=True)
    out = near.copy()
    out[inside] = np.sum(lam * values[dt.simplices[tri]], 1)
    return out


def _least_positive(values: np.ndarray) -> float:
    """The smallest positive value of a depth map (inf when it has none)."""
    positive = values[values > 0]
    return float(positive.min()) if positive.size else np.inf


def _barycentric(q: np.ndarray, simplices: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Barycentric weights ``[N, 3]`` of points ``p [N, 2]`` in triangles ``q[simplices]``."""
    a, b, c = (q[simplices[:, m]] for m in range(3))
    det = (b[:, 1] - c[:, 1]) * (a[:, 0] - c[:, 0]) + (c[:, 0] - b[:, 0]) * (a[:, 1] - c[:, 1])
    det = np.where(np.abs(det) > 1e-12, det, 1e-12)
    l1 = ((b[:, 1] - c[:, 1]) * (p[:, 0] - c[:, 0]) + (c[:, 0] - b[:, 0]) * (p[:, 1] - c[:, 1])) / det
    l2 = ((c[:, 1] - a[:, 1]) * (p[:, 0] - c[:, 0]) + (a[:, 0] - c[:, 0]) * (p[:, 1] - c[:, 1])) / det
    return np.stack([l1, l2, 1 - l1 - l2], 1)


def align(values: np.ndarray, kind: str, K: np.ndarray, viewmats: np.ndarray, points: np.ndarray,
          xy: np.ndarray, vis: np.ndarray, min_points: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Depth ``[T,H,W]`` in camera units and per-frame (scale, shift) ``[T, 2]``.

    Fits target ≈ s·values + b per frame (target = z for depth, 1/z for disparity) by least squares with
    two rounds of outlier trimming; frames with too few points take the median fit of the others, and so do
    depth frames whose fit would put some of their pixels on or behind the camera.

    Why the last: on a frame that sees few static points (DAVIS parkour's frame 83: 22, all on one side of
    the frame) the trimmed fit can be far off (scale 2.6, shift -8.3 there) and put half the frame at the
    1e-6 floor; the fit lifted the running man from that frame, onto the camera's centre, and never drew him.
    A depth map that holds positive depths cannot be right with some of them mapped to zero. (Disparity
    mapped to zero or below is the sky at infinity: allowed.)
    """
    from recon4d.priors.flow import sample

    T = len(values)
    fits = np.full((T, 2), np.nan)
    ok = np.isfinite(points).all(1)
    for t in range(T):
        sel = ok & vis[t]
        if sel.sum() < min_points:
            continue
        cam = points[sel] @ viewmats[t, :3, :3].T + viewmats[t, :3, 3]
        front = cam[:, 2] > 1e-6
        z = cam[front, 2]
        v = sample(values[t][..., None], xy[t, sel][front])[:, 0]
        target = z if kind == "depth" else 1.0 / z
        keep = np.ones(len(v), bool)
        for _ in range(3):
            A = np.stack([v[keep], np.ones(keep.sum())], 1)
            s, b = np.linalg.lstsq(A, target[keep], rcond=None)[0]
            r = np.abs(s * v + b - target)
            keep = r <= max(np.percentile(r, 80), 1e-9)
            if keep.sum() < min_points:
                break
        if kind == "disparity" or (s > 0 and s * _least_positive(values[t]) + b > 0):
            fits[t] = s, b
    good = np.isfinite(fits[:, 0])
    if not good.any():
        return (values if kind == "depth" else 1.0 / np.maximum(values, 1e-6)).astype(np.float32), np.tile([1.0, 0.0], (T, 1))
    fits[~good] = np.median(fits[good], 0)
    mapped = fits[:, 0, None, None] * values + fits[:, 1, None, None]
    if kind == "disparity":
        mapped = 1.0 / np.maximum(mapped, 1e-6)
    return np.maximum(mapped, 1e-6).astype(np.float32), fits
