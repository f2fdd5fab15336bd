"""Ingest a video, an image folder or a DAVIS sequence into ``<scene>/frames/``.

Why a separate step: every later stage reads the same frames at the same working
resolution, so decoding, frame selection and resizing happen once, streamed
(one frame in memory at a time, never the whole video at full size), and the
result is a plain folder of JPEGs plus ``frames.json`` that any tool can read.

Output (written into a temp folder, then swapped in with one rename, so a bad
input or a killed run never leaves a half-written ``frames/``)::

    frames/00000.jpg ...        RGB at working resolution
    frames/masks/00000.png ...  user masks (object ids, 0 = background), when given
    frames.json                 fps, width, height, source, indices (source frame numbers),
                                source_kind, source_size, masks

Every bad input ends in :class:`IngestError` with a message that says what to do.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import av
import cv2
import numpy as np
from PIL import Image
from tqdm import tqdm

from recon4d.errors import UserError
from recon4d.io.atomic import write_json

VIDEO_SUFFIXES = {".mp4", ".mov", ".avi", ".webm", ".mkv", ".m4v"}
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff"}
HUGE_LONG_SIDE = 1920  # above this a source counts as "huge" and the downscale is announced
DEFAULT_FPS = 24.0  # image folders carry no frame rate; DAVIS is 24 fps


class IngestError(UserError, ValueError):
    """A bad input for the frames stage, with a message that says what to change."""


@dataclass(frozen=True)
class IngestOptions:
    """Frame selection and working resolution."""

    stride: int = 1
    start: int = 0
    end: int | None = None  # exclusive, in source frames
    max_frames: int | None = None
    long_side: int | None = 480  # working resolution; never upscales; None keeps the source size
    allow_truncated: bool = False  # keep the frames decoded before a corrupt/truncated part
    masks: Path | None = None  # folder of mask PNGs; None: a DAVIS Annotations/ beside the frames
    spread: bool = False  # max_frames spaced evenly over the selection instead of its first ones


@dataclass
class FrameInfo:
    """What ``frames.json`` holds."""

    fps: float
    width: int
    height: int
    source: str
    indices: list[int]
    source_kind: str
    source_size: tuple[int, int]
    masks: bool

    def to_json(self) -> dict:
        return {
            "fps": self.fps, "width": self.width, "height": self.height, "source": self.source,
            "indices": self.indices, "source_kind": self.source_kind,
            "source_size": list(self.source_size), "masks": self.masks,
        }


def _selected(i: int, opt: IngestOptions) -> bool:
    return i >= opt.start and (i - opt.start) % opt.stride == 0 and (opt.end is None or i < opt.end)


def _working_size(w: int, h: int, long_side: int | None) -> tuple[int, int]:
    """Size after scaling the long side down to ``long_side`` (even numbers, never upscaled)."""
    scale = 1.0 if long_side is None else min(1.0, long_side / max(w, h))
    return max(2, int(round(w * scale / 2)) * 2), max(2, int(round(h * scale / 2)) * 2)


def _image_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith("."))


def resolve_source(path: Path) -> tuple[str, Path, Path | None]:
    """(kind, frames path, annotations folder or None) for a video file, image folder or DAVIS layout.

    DAVIS: ``<root>/JPEGImages/[480p/]<seq>`` (a whole dataset needs the sequence),
    or a sequence folder ``<seq>/JPEGImages`` as in ../shared/data/davis, with
    ``Annotations/`` found the same way beside it.
    """
    if not path.exists():
        raise IngestError(f"input not found: {path}")
    if path.is_file():
        return "video", path, None
    if (path / "JPEGImages").is_dir():
        jpeg = path / "JPEGImages"
        # A `recon4d synth` scene's Annotations/ are ground truth: kept for the report, never used as input.
        ann = None if (path / "synth.json").exists() else path / "Annotations"
        if (jpeg / "480p").is_dir():
            raise IngestError(f"{path} is a whole DAVIS dataset; pass one sequence, e.g. {jpeg / '480p' / '<seq>'}")
        if not _image_files(jpeg) and [d for d in jpeg.iterdir() if d.is_dir()]:
            raise IngestError(f"{path} holds several sequences; pass one of {jpeg}/<seq>")
        return "davis", jpeg, ann if ann is not None and ann.is_dir() else None
    parts = path.parts
    if "JPEGImages" in parts:  # <root>/JPEGImages/[480p/]<seq>: masks under Annotations/ at the same place
        i = parts.index("JPEGImages")
        ann = Path(*parts[:i], "Annotations", *parts[i + 1:])
        return "davis", path, ann if ann.is_dir() else None
    return "images", path, None


def _iter_images(files: list[Path]) -> Iterator[tuple[int, np.ndarray]]:
    for i, f in enumerate(files):
        img = cv2.imread(str(f), cv2.IMREAD_COLOR)
        if img is None:
            raise IngestError(f"cannot read image {f} (corrupt or not an image)")
        yield i, cv2.cvtColor(img, cv2.COLOR_BGR2RGB)


def _open_video(path: Path):
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, UnicodeDecodeError) as err:
        raise IngestError(f"{path} is not a readable video, or is truncated/corrupt ({err.__class__.__name__}: {err}); "
                          f"formats: {', '.join(sorted(VIDEO_SUFFIXES))}, an image folder or a DAVIS folder") from err
    if not container.streams.video:
        container.close()
        raise IngestError(f"{path} has no video stream")
    return container


def probe_video(path: Path) -> tuple[float, int]:
    """(fps, declared frame count, 0 when the container does not say) without decoding."""
    with _open_video(path) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate or stream.guessed_rate
        return (float(rate) if rate else DEFAULT_FPS), int(stream.frames or 0)


def _iter_video(path: Path, allow_truncated: bool, declared: int) -> Iterator[tuple[int, np.ndarray]]:
    """Decode frames one at a time; a decode error or a short stream is an error unless allowed."""
    count = 0
    with _open_video(path) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:
            for frame in container.decode(stream):
                yield count, frame.to_ndarray(format="rgb24")
                count += 1
        except av.error.FFmpegError as err:
            _truncated(path, count, f"decoding failed ({err})", allow_truncated)
            return
    if declared and count < declared:
        _truncated(path, count, f"the container declares {declared} frames", allow_truncated)


def _truncated(path: Path, count: int, why: str, allowed: bool) -> None:
    last = f"last good frame is {count - 1}" if count else "no frame decoded"
    if not allowed or count == 0:
        raise IngestError(f"{path} is truncated or corrupt: {why}; {last}. "
                          f"Pass --allow-truncated to keep the {count} good frames.")
    warnings.warn(f"{path} is truncated or corrupt ({why}); keeping frames 0..{count - 1}", stacklevel=3)


def _read_mask(path: Path) -> np.ndarray:
    """Mask ids ``[H, W] uint8``: palette PNGs give indices, other images are thresholded to 0/1."""
    with Image.open(path) as im:
        if im.mode == "P":
            return np.array(im, dtype=np.uint8)
        arr = np.array(im.convert("L"))
    return (arr > 127).astype(np.uint8)


def ingest(path: str | os.PathLike, scene: str | os.PathLike, opt: IngestOptions = IngestOptions(),
           progress: bool = True) -> FrameInfo:
    """Write ``<scene>/frames/`` and ``<scene>/frames.json`` from ``path``; returns what was written."""
    path, scene = Path(path), Path(scene)
    if opt.stride < 1 or opt.start < 0 or (opt.max_frames is not None and opt.max_frames < 1):
        raise IngestError(f"bad frame selection: stride {opt.stride}, start {opt.start}, max frames {opt.max_frames}")
    kind, src, ann = resolve_source(path)
    if opt.masks is not None:
        if not Path(opt.masks).is_dir():
            raise IngestError(f"mask folder not found: {opt.masks}")
        ann = Path(opt.masks)
    if kind == "video":
        if path.suffix.lower() not in VIDEO_SUFFIXES:
            raise IngestError(f"{path} is not a video (suffix {path.suffix!r}); expected one of "
                              f"{', '.join(sorted(VIDEO_SUFFIXES))}, an image folder or a DAVIS folder")
        fps, declared = probe_video(path)
        frames = _iter_video(path, opt.allow_truncated, declared)
        total = declared or None
    else:
        files = _image_files(src)
        if not files:
            raise IngestError(f"no images ({', '.join(sorted(IMAGE_SUFFIXES))}) in {src}")
        fps, frames, total = DEFAULT_FPS, _iter_images(files), len(files)
    mask_files = _image_files(ann) if ann is not None else []
    if ann is not None and not mask_files:
        raise IngestError(f"mask folder {ann} holds no images")

    frames_dir = scene / "frames"
    tmp = scene / f".frames.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "masks" if mask_files else tmp).mkdir(parents=True)
    try:
        info = _write_frames(frames, total, tmp, opt, mask_files, progress, str(path))
        step = (info.indices[-1] - info.indices[0]) / (len(info.indices) - 1) if opt.spread else opt.stride
        info.fps, info.source_kind = fps / step, kind
        _swap_in(tmp, frames_dir)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    write_json(scene / "frames.json", info.to_json())
    return info


def _write_frames(frames, total, tmp: Path, opt: IngestOptions, mask_files: list[Path], progress: bool,
                  source: str) -> FrameInfo:
    indices: list[int] = []
    size = src_size = None
    wanted = _spread(opt, total, source)
    bar = tqdm(frames, total=total, desc="frames", unit="frame", disable=not progress, leave=False)
    for i, rgb in bar:
        if opt.end is not None and i >= opt.end:
            break
        if not _selected(i, opt) or wanted is not None and i not in wanted:
            continue
        h, w = rgb.shape[:2]
        if src_size is None:
            src_size, size = (w, h), _working_size(w, h, opt.long_side)
            if max(w, h) > HUGE_LONG_SIDE and size != (w, h):
                warnings.warn(f"huge input {w}x{h}: frames are downscaled to {size[0]}x{size[1]} while streaming",
                              stacklevel=3)
        elif (w, h) != src_size:
            raise IngestError(f"{source}: frame {i} is {w}x{h} but the first frame is {src_size[0]}x{src_size[1]}; "
                              "all frames must have the same size")
        n = len(indices)
        small = rgb if size == (w, h) else cv2.resize(rgb, size, interpolation=cv2.INTER_AREA)
        if not cv2.imwrite(str(tmp / f"{n:05d}.jpg"), cv2.cvtColor(small, cv2.COLOR_RGB2BGR),
                           [cv2.IMWRITE_JPEG_QUALITY, 95]):
            raise IngestError(f"cannot write {tmp / f'{n:05d}.jpg'}")
        if mask_files:
            _write_mask(mask_files, i, src_size, size, tmp / "masks" / f"{n:05d}.png")
        indices.append(i)
        if opt.max_frames is not None and len(indices) >= opt.max_frames:
            break
    bar.close()
    if len(indices) < 2:
        raise IngestError(f"{source}: {len(indices)} frame(s) selected; at least 2 are needed "
                          f"(start {opt.start}, end {opt.end}, stride {opt.stride})")
    return FrameInfo(0.0, size[0], size[1], source, indices, "", src_size, bool(mask_files))


def _spread(opt: IngestOptions, total: int | None, source: str) -> set[int] | None:
    """The source frames ``opt.spread`` keeps: ``max_frames`` of the selection, evenly spaced, first and last
    included; None when every selected frame up to ``max_frames`` is kept."""
    if not opt.spread or opt.max_frames is None:
        return None
    if not total:
        raise IngestError(f"{source}: the video does not say how many frames it has, so frames cannot be spread "
                          "over it; drop --spread, or pass an image folder")
    selected = range(opt.start, total if opt.end is None else min(opt.end, total), opt.stride)
    picks = np.round(np.linspace(0, len(selected) - 1, min(opt.max_frames, len(selected)))).astype(int)
    return {selected[k] for k in picks}


def _write_mask(mask_files: list[Path], i: int, src_size, size, out: Path) -> None:
    if i >= len(mask_files):
        raise IngestError(f"no mask for frame {i}: the mask folder {mask_files[0].parent} has only {len(mask_files)}")
    mask = _read_mask(mask_files[i])
    if (mask.shape[1], mask.shape[0]) != src_size:
        raise IngestError(f"mask {mask_files[i]} is {mask.shape[1]}x{mask.shape[0]} but the frames are "
                          f"{src_size[0]}x{src_size[1]}; masks must match the frames")
    if size != src_size:
        mask = cv2.resize(mask, size, interpolation=cv2.INTER_NEAREST)
    Image.fromarray(mask).save(out)


def _swap_in(tmp: Path, target: Path) -> None:
    """Replace ``target`` (a folder) by ``tmp`` with renames only; the old folder goes last."""
    old = target.with_name(f".{target.name}.old{os.getpid()}")
    if target.exists():
        os.replace(target, old)
    os.replace(tmp, target)
    shutil.rmtree(old, ignore_errors=True)


def load_frames(scene: str | os.PathLike) -> tuple[np.ndarray, dict]:
    """All frames ``[T, H, W, 3] uint8`` at working resolution and ``frames.json``."""
    import json

    scene = Path(scene)
    meta = json.loads((scene / "frames.json").read_text())
    files = [scene / "frames" / f"{n:05d}.jpg" for n in range(len(meta["indices"]))]
    return np.stack([cv2.cvtColor(cv2.imread(str(f)), cv2.COLOR_BGR2RGB) for f in files]), meta


def load_masks(scene: str | os.PathLike) -> np.ndarray | None:
    """User masks ``[T, H, W] uint8`` (object ids) or None when the input had none."""
    folder = Path(scene) / "frames" / "masks"
    if not folder.is_dir():
        return None
    return np.stack([np.array(Image.open(f)) for f in sorted(folder.glob("*.png"))])
