"""`recon4d synth`: the ground truth must agree with the pixels, pairs must flip, runs must repeat.

Scenes are the tiny preset (24 frames, 128x96) rendered on CPU; the checks read
the written files back, as a user of the scene folder would.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import av
import cv2
import numpy as np
import pytest
from PIL import Image

from recon4d.commands import synth as synth_cmd
from recon4d.synth import SynthError, generate, preset
from recon4d.synth import questions as Q
from recon4d.synth.layout import build_scenes
from recon4d.synth.render import SceneRenderer

from .conftest import shared_data

VLM4D_KEYS = {"id", "video", "question_type", "question", "choices", "answer"}


def _read_scene(folder: Path):
    cams = json.loads((folder / "gt" / "cameras.json").read_text())
    K = np.array(cams["K"])
    views = np.array([f["viewmat"] for f in cams["frames"]])
    objects = json.loads((folder / "gt" / "objects.json").read_text())["objects"]
    masks = np.stack([np.array(Image.open(p)) for p in sorted((folder / "Annotations").glob("*.png"))])
    return K, views, objects, masks


@pytest.fixture(scope="module", params=["static", "pan", "dolly", "orbit"])
def rendered(request, tmp_path_factory):
    """A three-object tiny scene for each camera path, written to disk."""
    cfg = preset("tiny", seed=2, objects=3, camera=request.param, out=tmp_path_factory.mktemp(request.param))
    (report,) = generate(cfg)
    return cfg, report.path


def test_centre_reprojects_inside_its_mask_in_every_frame(rendered):
    cfg, folder = rendered
    K, views, objects, masks = _read_scene(folder)
    assert masks.shape == (cfg.frames, cfg.size[1], cfg.size[0])
    assert Image.open(folder / "Annotations" / "00000.png").mode == "P"  # DAVIS palette PNG
    for obj in objects:
        centre = np.array(obj["centre"])
        cam = np.einsum("tij,tj->ti", views[:, :3, :3], centre) + views[:, :3, 3]
        uv = cam[:, :2] / cam[:, 2:] @ K[:2, :2].T + K[:2, 2]
        col, row = np.floor(uv).astype(int).T
        assert np.all((col >= 0) & (col < cfg.size[0]) & (row >= 0) & (row < cfg.size[1])), obj["name"]
        hit = masks[np.arange(cfg.frames), row, col]
        assert np.all(hit == obj["id"]), f"{obj['name']}: centre falls on ids {hit.tolist()}"
        assert np.all((masks == obj["id"]).sum((1, 2)) > 20), f"{obj['name']} nearly invisible"


def test_gt_depth_is_the_rasterizer_depth_and_matches_geometry(rendered):
    cfg, folder = rendered
    K, views, objects, masks = _read_scene(folder)
    gt = np.load(folder / "gt" / "depth.npz")
    depth, alpha = gt["depth"].astype(np.float32), gt["alpha"] / 255.0
    assert depth.shape == (cfg.frames, cfg.size[1], cfg.size[0]) and gt["depth"].dtype == np.float16

    # 1. The file is the rasterizer's depth of the scene that synth.json describes.
    (scene,) = build_scenes(cfg)
    renderer = SceneRenderer(scene, cfg.detail)
    t = cfg.frames // 3
    again = renderer.render(t, scene.viewmats[t][None], scene.K[None])[0]
    # stored as float16: 2^-11 relative rounding
    np.testing.assert_allclose(again.depth, depth[t], rtol=2**-11, atol=1e-6)

    # 2. On the ground, it is the depth of the plane z = 0 along each pixel's ray, up to the
    #    blur of the splats: expected depth composites overlapping flat Gaussians front to back,
    #    so it reads a few percent short at grazing angles (measured: median -3%).
    H, W = depth.shape[1:]
    u, v = np.meshgrid(np.arange(W) + 0.5, np.arange(H) + 0.5)
    rays_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], -1)
    errors = []
    for t in range(cfg.frames):
        R, tr = views[t, :3, :3], views[t, :3, 3]
        eye = -R.T @ tr
        rays = rays_cam @ R  # world direction per pixel, scaled to unit camera z
        z_ground = -eye[2] / np.where(rays[..., 2] < -1e-6, rays[..., 2], np.nan)
        hit = eye[:2] + z_ground[..., None] * rays[..., :2]
        near_object = cv2.dilate((masks[t] > 0).astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
        ground = ~near_object & (alpha[t] > 0.99) & (np.hypot(*hit.transpose(2, 0, 1)) < 7.0) & (z_ground > 0)
        errors.append((depth[t][ground] - z_ground[ground]) / z_ground[ground])
    errors = np.concatenate(errors)
    assert errors.size > 1000
    lo, median, hi = np.percentile(errors, [2.5, 50, 97.5])
    assert -0.04 < median < 0.0 and lo > -0.08 and hi < 0.01, (lo, median, hi)

    # 3. At an object's projected centre, the depth is its front surface: between centre - radius and centre.
    for obj in objects:
        centre = np.array(obj["centre"])
        cam = np.einsum("tij,tj->ti", views[:, :3, :3], centre) + views[:, :3, 3]
        uv = cam[:, :2] / cam[:, 2:] @ K[:2, :2].T + K[:2, 2]
        col, row = np.floor(uv).astype(int).T
        d = depth[np.arange(cfg.frames), row, col]
        assert np.all(d < cam[:, 2]) and np.all(d > cam[:, 2] - obj["bounding_radius"] - 0.05), obj["name"]


def test_outputs_are_complete_and_in_vlm4d_format(rendered):
    cfg, folder = rendered
    with av.open(str(folder / "video.mp4")) as container:
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    assert len(frames) == cfg.frames and frames[0].shape == (cfg.size[1], cfg.size[0], 3)
    jpg = np.array(Image.open(folder / "JPEGImages" / "00000.jpg"))
    assert np.abs(jpg.astype(int) - frames[0].astype(int)).mean() < 6  # same picture, two codecs
    novel = sorted((folder / "gt" / "novel" / "JPEGImages").glob("*.jpg"))
    assert len(novel) == cfg.frames and (folder / "gt" / "novel" / "cameras.json").exists()

    qa = json.loads((folder / "qa.json").read_text())
    meta = json.loads((folder / "gt" / "questions.json").read_text())
    assert len(qa) == len(meta) >= 10
    for entry, m in zip(qa, meta):
        assert set(entry) == VLM4D_KEYS and entry["id"] == m["id"]
        assert entry["question_type"] == "multiple-choice" and list(entry["choices"]) == list("ABCD")
        assert entry["answer"] in entry["choices"].values()
        assert len(set(map(str, entry["choices"].values()))) == 4
    absent = [m for m in meta if m["kind"].startswith("absent")]
    assert 0.05 <= len(absent) / len(qa) <= 0.15
    for entry, m in zip(qa, meta):
        if m["kind"].startswith("absent"):
            assert entry["answer"].startswith("no ") and entry["answer"].endswith(" there")
    record = json.loads((folder / "synth.json").read_text())
    assert record["seed"] == cfg.seed and record["config"]["camera"] == cfg.camera


def test_qa_format_matches_the_real_vlm4d_files(rendered):
    _, folder = rendered
    real = json.loads(shared_data("vlm4d", "vlm4d_synthetic_mc.json").read_text())
    ours = json.loads((folder / "qa.json").read_text())
    assert {frozenset(e) for e in real} == {frozenset(e) for e in ours} == {frozenset(VLM4D_KEYS)}
    assert {type(e["answer"]) for e in ours} <= {str, int}


def _answers(scene) -> dict[str, str | int]:
    return {q.key: q.answer for q in Q.ask(scene)}


def test_answers_are_computed_from_the_motions():
    cfg = preset("tiny", seed=5, motion=("left", "spin_cw", "static"))
    (scene,) = build_scenes(cfg)
    a, b, c = (o.name for o in scene.objects)
    ans = _answers(scene)
    assert ans[f"camera_direction:{a}"] == "left"
    assert ans[f"own_direction:{a}"] == "forwards"
    assert ans[f"own_turn:{a}"] == "moving straight and not turning"
    assert ans[f"rotation:{b}"] == "clockwise" and ans[f"camera_direction:{b}"] == "not moving"
    assert ans[f"rotation:{c}"] == "not rotating" and ans[f"distance:{c}"] == "not moving"
    assert ans["count_left"] == 1 and ans["count_right"] == 0
    assert ans["count_still"] == 2 and ans["count_spinning"] == 1
    first = scene.objects[0].shape
    assert ans[f"count_{first}"] == sum(o.shape == first for o in scene.objects) >= 1


# factor -> (question key prefix, answer in scene a, answer in scene b)
FLIPS = {
    "direction": ("camera_direction", "left", "right"),
    "approach": ("distance", "coming closer", "going further away"),
    "turn": ("own_turn", "left", "right"),
    "spin": ("rotation", "clockwise", "counter-clockwise"),
    "follow": ("relative_heading", "left", "right"),
}


@pytest.mark.parametrize("camera", ["static", "orbit"])
@pytest.mark.parametrize("factor", list(FLIPS))
def test_minimal_pair_flips_the_answer_and_nothing_else(factor, camera):
    a, b = build_scenes(preset("tiny", seed=3, pairs=factor, camera=camera))
    assert a.pair["partner"] == b.scene_id and b.pair["partner"] == a.scene_id
    changed = a.pair["changed_object"] - 1
    for i, (oa, ob) in enumerate(zip(a.objects, b.objects)):
        assert oa.name == ob.name
        if i != changed:
            np.testing.assert_array_equal(oa.centre, ob.centre)
            np.testing.assert_array_equal(oa.yaw, ob.yaw)
    np.testing.assert_array_equal(a.viewmats, b.viewmats)
    prefix, want_a, want_b = FLIPS[factor]
    subject = a.objects[changed].name
    (key,) = [k for k in _answers(a) if k.startswith(f"{prefix}:{subject}")]
    assert (_answers(a)[key], _answers(b)[key]) == (want_a, want_b)


def test_written_pair_links_ids_and_flips_the_direction_answer(tmp_path):
    cfg = preset("tiny", seed=1, pairs="direction", novel=False, out=tmp_path)
    ra, rb = generate(cfg)
    qa_a, qa_b = (json.loads((r.path / "qa.json").read_text()) for r in (ra, rb))
    meta_a = json.loads((ra.path / "gt" / "questions.json").read_text())
    assert [q["question"] for q in qa_a] == [q["question"] for q in qa_b]
    assert [q["choices"] for q in qa_a] == [q["choices"] for q in qa_b]  # same shuffle, same options
    assert [m["partner_id"] for m in meta_a] == [q["id"] for q in qa_b]
    subject = json.loads((ra.path / "synth.json").read_text())["objects"][0]["name"]
    i = next(k for k, m in enumerate(meta_a) if m["key"] == f"camera_direction:{subject}")
    assert (qa_a[i]["answer"], qa_b[i]["answer"]) == ("left", "right")


def test_same_seed_gives_identical_files(tmp_path):
    files = []
    for run in ("one", "two"):
        generate(preset("tiny", seed=4, out=tmp_path / run))
        root = tmp_path / run
        files.append({p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()})
    assert files[0].keys() == files[1].keys() and len(files[0]) > 100
    different = [str(p) for p in files[0] if files[0][p] != files[1][p]]
    assert not different, different
    # ...and the seed matters: another seed lays out and asks something else
    (a,), (b,) = build_scenes(preset("tiny", seed=4)), build_scenes(preset("tiny", seed=5))
    assert Q.to_vlm4d(a, Q.ask(a))[0] != Q.to_vlm4d(b, Q.ask(b))[0]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"frames": 0}, "--frames must be at least 2"),
        ({"motion": ("fly",)}, "unknown motion 'fly'"),
        ({"fov_deg": 0.0}, "--fov-deg must be strictly between 0 and 180"),
        ({"fov_deg": 180.0}, "--fov-deg must be strictly between 0 and 180"),
        ({"camera_distance": 0.3, "camera_height": 0.5}, "impossible camera"),
        ({"camera": "crane"}, "unknown --camera 'crane'"),
        ({"size": (127, 96)}, "must be even"),
        ({"pairs": "colour"}, "unknown --pairs factor 'colour'"),
        ({"motion": ("follow_left",)}, "follows the first object"),
        ({"fov_deg": 3.0, "objects": 3}, "could not place 3 object"),
    ],
)
def test_bad_arguments_raise_clear_errors(overrides, message, tmp_path):
    with pytest.raises(SynthError, match=message.replace("(", r"\(").replace("[", r"\[")):
        generate(dataclasses.replace(preset("tiny", out=tmp_path), **overrides))
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_cli_reports_bad_arguments_in_one_line(tmp_path, capsys):
    assert synth_cmd.main(["--frames", "0", "--out", str(tmp_path)]) == 2
    assert "recon4d synth: --frames must be at least 2" in capsys.readouterr().err
    assert synth_cmd.main(["--preset", "huge"]) == 2
    assert "unknown preset 'huge'" in capsys.readouterr().err
