"""File formats of a synthetic scene folder (layout in :mod:`recon4d.synth`).

Each writer is atomic (``recon4d.io.atomic``) and deterministic: the same scene
gives byte-identical files, which is how the determinism test compares runs.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import cv2
import numpy as np
from PIL import Image

from recon4d.io.atomic import atomic_path, write_bytes, write_json
from recon4d.synth.render import Frame
from recon4d.synth.scene import SHAPES, Scene

JPEG_QUALITY = 95
CONVENTION = "OpenCV camera (x right, y down, z forward); viewmat = world-to-camera; world z up, ground at z = 0"


def davis_palette() -> list[int]:
    """The 256-colour palette of DAVIS/PASCAL VOC annotations (0 black, 1 dark red, 2 green, ...)."""
    palette = []
    for label in range(256):
        r = g = b = 0
        c = label
        for bit in range(8):
            r |= ((c >> 0) & 1) << (7 - bit)
            g |= ((c >> 1) & 1) << (7 - bit)
            b |= ((c >> 2) & 1) << (7 - bit)
            c >>= 3
        palette += [r, g, b]
    return palette


_PALETTE = davis_palette()


def write_frame(folder: Path, index: int, frame: Frame, masks: bool = True) -> None:
    """``JPEGImages/<index>.jpg`` and (with ``masks``) ``Annotations/<index>.png`` as DAVIS stores them."""
    ok, jpg = cv2.imencode(".jpg", frame.rgb[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
    if not ok:
        raise RuntimeError("JPEG encoding failed")
    write_bytes(folder / "JPEGImages" / f"{index:05d}.jpg", jpg.tobytes())
    if masks:
        png = Image.fromarray(frame.ids, mode="P")
        png.putpalette(_PALETTE)
        buf = io.BytesIO()
        png.save(buf, format="PNG")
        write_bytes(folder / "Annotations" / f"{index:05d}.png", buf.getvalue())


def write_npz(path: Path, compress: bool = False, **arrays: np.ndarray) -> None:
    """An ``.npz`` that ``np.load`` reads, with fixed zip timestamps.

    ``np.savez`` stamps each member with the current time, so two identical
    scenes would differ byte for byte; this writes the same ``.npy`` members
    with a constant date.
    """
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with atomic_path(path) as tmp, zipfile.ZipFile(tmp, "w", compression=method) as zf:
        for name, array in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            with zf.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)


def write_depth(path: Path, depth: np.ndarray, alpha: np.ndarray) -> None:
    """``depth`` [T,H,W] float16 metres (camera z, 0 where empty) and ``alpha`` [T,H,W] uint8 (x255).

    float16 keeps depth to 0.05% (5 mm at 10 m), far finer than the splats' own
    blur, and keeps an 80-frame 854x480 scene's depth near 40 MB instead of 130.
    """
    write_npz(
        path,
        compress=True,
        depth=depth.astype(np.float16),
        alpha=np.clip(np.round(alpha * 255.0), 0, 255).astype(np.uint8),
    )


def write_cameras(folder: Path, K: np.ndarray, viewmats: np.ndarray, width: int, height: int, fps: int, fov_deg: float) -> None:
    """``cameras.json`` (readable, per frame) and ``cameras.npz`` (K [3,3], viewmats [T,4,4])."""
    write_json(
        folder / "cameras.json",
        {
            "convention": CONVENTION,
            "width": width,
            "height": height,
            "fps": fps,
            "fov_deg": fov_deg,
            "K": K.tolist(),
            "frames": [{"index": t, "viewmat": v.tolist()} for t, v in enumerate(viewmats)],
        },
    )
    write_npz(folder / "cameras.npz", K=K, viewmats=viewmats)


def write_objects(folder: Path, scene: Scene) -> None:
    """Per-object trajectories: ``objects.json`` and ``objects.npz`` (centres, yaws, quats)."""
    objects = []
    for o in scene.objects:
        objects.append(
            {
                "id": o.id,
                "name": o.name,
                "colour": o.colour,
                "shape": o.shape,
                "dims": list(SHAPES[o.shape]),
                "bounding_radius": o.radius,
                "motion": o.motion,
                "front": "local +x",
                "centre": o.centre.tolist(),
                "yaw": o.yaw.tolist(),
                "quat_wxyz": o.quats().tolist(),
            }
        )
    write_json(folder / "objects.json", {"convention": CONVENTION, "objects": objects})
    write_npz(
        folder / "objects.npz",
        ids=np.array([o.id for o in scene.objects]),
        centres=np.stack([o.centre for o in scene.objects]),
        yaws=np.stack([o.yaw for o in scene.objects]),
        quats=np.stack([o.quats() for o in scene.objects]),
    )
