"""Frame ingestion: every input kind, frame selection, resizing, and clean failures that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import cv2
import numpy as np
import pytest

from recon4d.io.frames import IngestError, IngestOptions, ingest, load_frames, load_masks
from recon4d.io.video import write_video
from tests.conftest import shared_data


def _frames(n=6, w=64, h=48):
    """Frames whose mean brightness encodes their index (so order and selection can be checked)."""
    return [np.full((h, w, 3), 20 + 30 * i, np.uint8) for i in range(n)]


@pytest.fixture
def mp4(tmp_path) -> Path:
    return write_video(tmp_path / "v.mp4", _frames(), fps=10)


def test_mp4_selection_and_fps(mp4, tmp_path):
    info = ingest(mp4, tmp_path / "s", IngestOptions(stride=2, start=1, max_frames=2), progress=False)
    frames, meta = load_frames(tmp_path / "s")
    assert meta["indices"] == [1, 3] and meta["fps"] == 5.0 and (meta["width"], meta["height"]) == (64, 48)
    assert np.allclose(frames.reshape(2, -1).mean(1), [50, 110], atol=3)
    assert info.source_kind == "video"


def test_spread_takes_frames_evenly_over_the_whole_selection(tmp_path):
    src = tmp_path / "imgs"
    src.mkdir()
    for i, f in enumerate(_frames(8)):
        cv2.imwrite(str(src / f"{i:03d}.png"), f)
    info = ingest(src, tmp_path / "s", IngestOptions(max_frames=4, spread=True), progress=False)
    frames, meta = load_frames(tmp_path / "s")
    assert info.indices == [0, 2, 5, 7] and meta["fps"] == pytest.approx(24.0 / (7 / 3))
    assert np.allclose(frames.reshape(4, -1).mean(1), [20 + 30 * i for i in (0, 2, 5, 7)], atol=3)
    within = ingest(src, tmp_path / "t", IngestOptions(start=1, end=8, stride=2, max_frames=3, spread=True),
                    progress=False)
    assert within.indices == [1, 5, 7]  # of 1, 3, 5, 7: the first, the last, and 5 (NumPy rounds 1.5 to 2)


def test_image_folder_resize_and_masks(tmp_path):
    src = tmp_path / "imgs"
    masks = tmp_path / "m"
    src.mkdir(), masks.mkdir()
    for i, f in enumerate(_frames(3, 200, 100)):
        cv2.imwrite(str(src / f"{i:03d}.png"), f)
        m = np.zeros((100, 200), np.uint8)
        m[20:60, 40:120] = 255
        cv2.imwrite(str(masks / f"{i:03d}.png"), m)
    ingest(src, tmp_path / "s", IngestOptions(long_side=100, masks=masks), progress=False)
    frames, meta = load_frames(tmp_path / "s")
    user = load_masks(tmp_path / "s")
    assert frames.shape == (3, 50, 100, 3) and meta["source_size"] == [200, 100]
    assert user.shape == (3, 50, 100) and user[0, 10:30, 20:60].all() and not user[0, :9].any()


def _fails(src, scene, match, **opt):
    with pytest.raises(IngestError, match=match):
        ingest(src, scene, IngestOptions(**opt), progress=False)
    assert not (scene / "frames").exists() and not (scene / "frames.json").exists()
    assert not list(scene.glob(".frames*")) if scene.exists() else True


def test_bad_inputs_write_nothing(tmp_path, mp4):
    scene = tmp_path / "s"
    _fails(tmp_path / "missing.mp4", scene, "not found")
    (tmp_path / "notes.mp4").write_text("not a video")
    _fails(tmp_path / "notes.mp4", scene, "not a readable video")
    (tmp_path / "x.txt").write_text("hello")
    _fails(tmp_path / "x.txt", scene, "not a video")
    _fails(mp4, scene, "at least 2", max_frames=1)
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    cv2.imwrite(str(mixed / "0.png"), _frames(1)[0])
    cv2.imwrite(str(mixed / "1.png"), _frames(1, 32, 32)[0])
    _fails(mixed, scene, "same size")
    bad_masks = tmp_path / "bm"
    bad_masks.mkdir()
    for i in range(6):
        cv2.imwrite(str(bad_masks / f"{i}.png"), np.zeros((10, 10), np.uint8))
    _fails(mp4, scene, "masks must match", masks=bad_masks)


def _faststart_mp4(path: Path, n: int) -> Path:
    """An mp4 with its index first (as phones and web videos write it), so cutting the tail keeps it readable."""
    import av

    with av.open(str(path), "w", format="mp4", options={"movflags": "faststart"}) as c:
        s = c.add_stream("mpeg4", rate=10)
        s.width, s.height, s.pix_fmt = 64, 48, "yuv420p"
        for i in range(n):
            img = np.random.default_rng(i).integers(0, 255, (48, 64, 3), np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def test_truncated_mp4(tmp_path):
    """A cut-off file: an error naming the last good frame, or the good frames with allow_truncated."""
    data = _faststart_mp4(tmp_path / "long.mp4", 30).read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(IngestError, match="truncated or corrupt.*last good frame is"):
        ingest(cut, tmp_path / "s", progress=False)
    assert not (tmp_path / "s" / "frames").exists()
    with pytest.warns(UserWarning, match="truncated"):
        info = ingest(cut, tmp_path / "s", IngestOptions(allow_truncated=True), progress=False)
    assert 2 <= len(info.indices) < 30


def test_rerun_replaces_frames(mp4, tmp_path):
    ingest(mp4, tmp_path / "s", progress=False)
    ingest(mp4, tmp_path / "s", IngestOptions(max_frames=3), progress=False)
    assert len(list((tmp_path / "s" / "frames").glob("*.jpg"))) == 3
    assert json.loads((tmp_path / "s" / "frames.json").read_text())["indices"] == [0, 1, 2]


def test_davis_sequence_with_annotations(tmp_path):
    seq = shared_data("davis", "horsejump-high")
    info = ingest(seq, tmp_path / "hj", IngestOptions(max_frames=5), progress=False)
    user = load_masks(tmp_path / "hj")
    assert (info.width, info.height) == (480, 270) and info.source_kind == "davis" and info.masks
    assert user.shape == (5, 270, 480) and 0.01 < (user > 0).mean() < 0.5
