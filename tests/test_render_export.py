"""recon4d render / export on a fitted synthetic scene: numbers checked against the fit and the ground truth."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import av
import numpy as np
import pytest
import torch
from plyfile import PlyData
from safetensors.torch import load_file

from recon4d.commands import export as export_command
from recon4d.commands import render as render_command
from recon4d.commands import view as view_command
from recon4d.export.job import ExportJob, run_export
from recon4d.export.ply import read_ply
from recon4d.export.transforms import read_transforms
from recon4d.render import rasterize
from recon4d.render import video as render_video
from recon4d.render.cameras import PathOptions, camera_centre, camera_path, centre_depth, global_camera
from recon4d.render.fitted import load_fitted
from recon4d.render.video import RenderJob, parse_frames, run_render
from recon4d.scene_folder import MissingStageError


def _decode(path: Path) -> np.ndarray:
    with av.open(str(path)) as c:
        return np.stack([f.to_ndarray(format="rgb24") for f in c.decode(video=0)])


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    return float(-10 * np.log10(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2) / 255.0**2))


def test_input_render_reproduces_training_psnr(fitted_left_scene, capsys):
    _, scene_dir = fitted_left_scene
    reported = json.loads((scene_dir / "metrics.json").read_text())["psnr_train"]
    summary = run_render(RenderJob(scene_dir, path="input", decode=("patch",)))
    assert abs(summary["psnr"] - reported) < 0.1, (summary["psnr"], reported)

    out = scene_dir / "renders" / "input"
    data = load_fitted(scene_dir).data
    rgb = _decode(out / "rgb.mp4")
    assert rgb.shape == (24, 96, 128, 3)
    frames = (data.images.numpy() * 255 + 0.5).astype(np.uint8)
    assert _psnr(rgb, frames) > 30.0  # the video is the render, up to the codec's loss
    for name in ("depth.mp4", "features_pca.mp4"):
        assert _decode(out / name).shape == (24, 96, 128, 3)
    maps = load_file(str(out / "features.safetensors"))
    assert maps["latent"].shape == (24, 96, 128, 32)
    assert maps["decoded.patch"].shape == (24, *data.teachers["patch"].shape[1:])  # teacher token grid
    assert maps["frames"].tolist() == list(range(24))
    assert torch.equal(maps["viewmats"], data.viewmats)
    cams = json.loads((out / "cameras.json").read_text())
    assert len(cams["frames"]) == 24 and cams["frames"][5]["viewmat"] == data.viewmats[5].tolist()
    assert not (out / ".partial").exists()

    # A second run finds the outputs up to date and does not touch them.
    before = (out / "rgb.mp4").stat().st_mtime_ns
    assert run_render(RenderJob(scene_dir, path="input", decode=("patch",)))["psnr"] == summary["psnr"]
    assert (out / "rgb.mp4").stat().st_mtime_ns == before
    assert "up to date" in capsys.readouterr().out


def test_global_camera_is_where_the_rule_says(fitted_left_scene):
    synth_dir, scene_dir = fitted_left_scene
    fitted = load_fitted(scene_dir)
    gt = np.load(synth_dir / "gt" / "novel" / "cameras.npz")
    gt_view, gt_K = torch.from_numpy(gt["viewmats"][0]).float(), torch.from_numpy(gt["K"]).float()
    gt_depth = np.load(synth_dir / "gt" / "depth.npz")["depth"]
    T, H, W = gt_depth.shape
    d_true = float(gt_depth[T // 2, H // 2, W // 2])

    # The rule itself, fed the true centre depth, lands on the synth's novel camera.
    view, K = global_camera(fitted.scene, fitted.data, depth=d_true)
    assert torch.allclose(K, gt_K)
    assert torch.allclose(view, gt_view, atol=2e-3), (view - gt_view).abs().max()
    # By hand: 0.5 d behind, 0.2 d above (world z), looking at the point at depth d.
    mid = fitted.data.viewmats[T // 2]
    eye, fwd = camera_centre(mid), mid[2, :3]
    expected = eye - 0.5 * d_true * fwd + torch.tensor([0.0, 0.0, 0.2 * d_true])
    assert torch.allclose(camera_centre(view), expected, atol=1e-3)
    target = eye + d_true * fwd
    look = (target - camera_centre(view)) / (target - camera_centre(view)).norm()
    assert torch.allclose(view[2, :3], look, atol=1e-5)
    assert math.degrees(2 * math.atan(W / 2 / float(K[0, 0]))) == pytest.approx(70.0)

    # With the depth the fitted scene renders (what `recon4d render --path global` uses).
    d_fit = centre_depth(fitted.scene, fitted.data, T // 2)
    assert abs(d_fit - d_true) / d_true < 0.06, (d_fit, d_true)
    view, _ = global_camera(fitted.scene, fitted.data)
    assert (camera_centre(view) - camera_centre(gt_view)).norm() < 0.04 * d_true
    cos = float(view[2, :3] @ gt_view[2, :3])
    assert math.degrees(math.acos(min(1.0, cos))) < 1.0

    # Overridable parameters move it as the rule says.
    far, _ = global_camera(fitted.scene, fitted.data, back=1.0, up=0.0, depth=d_true)
    assert torch.allclose(camera_centre(far), eye - d_true * fwd, atol=1e-3)
    wide, K70 = global_camera(fitted.scene, fitted.data, fov_deg=90.0, depth=d_true)
    assert float(wide.sub(gt_view).abs().max()) < 2e-3 and float(K70[0, 0]) == pytest.approx(W / 2)


def test_global_render_writes_a_fixed_camera(fitted_left_scene):
    _, scene_dir = fitted_left_scene
    summary = run_render(RenderJob(scene_dir, path="global", frames="0:24:12", scale=0.5))
    assert (summary["width"], summary["height"]) == (64, 48) and summary["frames"] == 2
    maps = load_file(str(Path(summary["out"]) / "features.safetensors"))
    assert maps["frames"].tolist() == [0, 12]
    assert torch.equal(maps["viewmats"][0], maps["viewmats"][1])  # one camera, time moving
    assert maps["latent"].shape == (2, 48, 64, 32)
    assert not torch.equal(maps["latent"][0], maps["latent"][1])  # the object moved


def test_inspection_paths(fitted_left_scene):
    _, scene_dir = fitted_left_scene
    f = load_fitted(scene_dir)
    times = list(range(0, 24, 4))
    mid = f.data.viewmats[12]
    d = centre_depth(f.scene, f.data, 12)
    target = camera_centre(mid) + d * mid[2, :3]

    orbit = camera_path("orbit", f.scene, f.data, times, PathOptions(orbit_deg=90.0))
    radii = torch.stack([(camera_centre(v) - target).norm() for v in orbit.viewmats])
    assert torch.allclose(radii, radii[0].expand_as(radii), rtol=1e-4)
    for v in orbit.viewmats:  # every orbit camera looks at the target point
        assert (v[:3, :3] @ target + v[:3, 3])[:2].abs().max() < 1e-3
    first, last = camera_centre(orbit.viewmats[0]) - target, camera_centre(orbit.viewmats[-1]) - target
    flat = torch.tensor([1.0, 1.0, 0.0])  # azimuth swept about world up (z)
    angle = math.degrees(math.acos(float(torch.nn.functional.cosine_similarity(first * flat, last * flat, dim=0))))
    assert angle == pytest.approx(90.0, abs=0.1)

    top = camera_path("birdseye", f.scene, f.data, times)
    assert torch.allclose(top.viewmats[0][2, :3], torch.tensor([0.0, 0.0, -1.0]), atol=1e-5)  # looks down

    fixed = camera_path("fixed", f.scene, f.data, times, PathOptions(frame=3))
    assert all(torch.equal(v, f.data.viewmats[3]) for v in fixed.viewmats) and fixed.times == times
    with pytest.raises(ValueError, match="outside"):
        camera_path("fixed", f.scene, f.data, times, PathOptions(frame=99))


def test_render_resumes_after_a_kill(fitted_left_scene, monkeypatch):
    _, scene_dir = fitted_left_scene
    out = scene_dir / "renders" / "resume-check"
    job = RenderJob(scene_dir, path="fixed", frames="0,8,16", scale=0.5, out=out)
    real, calls = render_video.render_frame, []

    def dies_on_third(fitted, cams, i, decode):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(i)
        return real(fitted, cams, i, decode)

    monkeypatch.setattr(render_video, "render_frame", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        run_render(job)
    kept = sorted(p.name for p in (out / ".partial").glob("*.safetensors"))
    assert kept == ["00000.safetensors", "00001.safetensors"]
    assert not (out / "rgb.mp4").exists()

    calls.clear()
    monkeypatch.setattr(render_video, "render_frame", lambda *a: calls.append(a[2]) or real(*a))
    run_render(job)
    assert calls == [2]  # only the missing frame
    assert _decode(out / "rgb.mp4").shape[0] == 3


def test_frame_specs():
    assert parse_frames(":", 5) == [0, 1, 2, 3, 4]
    assert parse_frames("1:5:2", 9) == [1, 3]
    assert parse_frames("0, 4,7", 9) == [0, 4, 7]
    with pytest.raises(ValueError, match="outside"):
        parse_frames("3,12", 9)
    with pytest.raises(ValueError, match="no frame"):
        parse_frames("5:5", 9)


def test_ply_round_trip_renders_identically(fitted_left_scene, tmp_path):
    _, scene_dir = fitted_left_scene
    f = load_fitted(scene_dir)
    t = 12
    paths = run_export(ExportJob(scene_dir, frames=str(t), out=tmp_path / "export"))
    ply = PlyData.read(str(paths["static"]))
    names = [p.name for p in ply["vertex"].properties]
    assert names[:17] == ["x", "y", "z", "nx", "ny", "nz", "f_dc_0", "f_dc_1", "f_dc_2", "opacity",
                          "scale_0", "scale_1", "scale_2", "rot_0", "rot_1", "rot_2", "rot_3"]
    assert names[17:] == [f"latent_{i}" for i in range(32)]
    assert ply["vertex"].count == len(f.scene.static)
    assert [p.name for p in paths["dynamic"]] == [f"{t:05d}.ply"]

    st, dy = read_ply(paths["static"]), read_ply(paths["dynamic"][0])
    means, quats, scales = (torch.cat([getattr(st, k), getattr(dy, k)]) for k in ("means", "quats", "scales"))
    opac = torch.cat([st.opacities, dy.opacities])
    feats = torch.cat([torch.cat([st.colors, st.latents], 1), torch.cat([dy.colors, dy.latents], 1)])
    g = f.scene.at(t)
    ref_feats = torch.cat([g.features[:, :3], g.features[:, 4:]], 1)
    cam = (f.data.viewmats[t:t + 1], f.data.K[None], f.data.width, f.data.height)
    with torch.no_grad():
        a = rasterize(g.means, g.quats, g.scales, g.opacities, ref_feats, *cam)
        b = rasterize(means, quats, scales, opac, feats, *cam)
    assert (a.features - b.features).abs().max() < 1e-5
    assert (a.depth - b.depth).abs().max() < 1e-5 and (a.alpha - b.alpha).abs().max() < 1e-6
    # As 8-bit images they are equal except where a value lies within that float rounding of a
    # half level (exact 8-bit equality cannot survive any float difference; a fit put one there).
    a8, b8 = a.features[..., :3] * 255, b.features[..., :3] * 255
    differ = a8.round() != b8.round()
    assert differ.sum() <= 1e-4 * differ.numel(), int(differ.sum())
    assert ((a8[differ] - a8[differ].floor() - 0.5).abs() < 255 * 1e-5).all()


def test_transforms_json_reproduces_the_solved_poses(fitted_left_scene, tmp_path):
    _, scene_dir = fitted_left_scene
    data = load_fitted(scene_dir).data
    paths = run_export(ExportJob(scene_dir, frames="0", latents=False, out=tmp_path / "export"))
    K, viewmats, files = read_transforms(paths["transforms"])
    assert torch.allclose(viewmats, data.viewmats, atol=1e-5)
    assert torch.allclose(K, data.K)
    assert len(files) == data.frames and all(p.exists() for p in files)
    doc = json.loads(paths["transforms"].read_text())
    assert (doc["w"], doc["h"]) == (data.width, data.height)
    c2w = torch.tensor(doc["frames"][0]["transform_matrix"])
    # OpenGL camera-to-world: translation = camera centre, camera looks along -z.
    assert torch.allclose(c2w[:3, 3], camera_centre(data.viewmats[0]), atol=1e-5)
    assert torch.allclose(-c2w[:3, 2], data.viewmats[0][2, :3], atol=1e-6)
    assert "latent_0" not in [p.name for p in PlyData.read(str(paths["static"]))["vertex"].properties]


@pytest.fixture
def unfinished_scene(fitted_left_scene, tmp_path) -> Path:
    _, scene_dir = fitted_left_scene
    copy = tmp_path / scene_dir.name
    shutil.copytree(scene_dir, copy, ignore=shutil.ignore_patterns("renders", "export"))
    meta = json.loads((copy / "model" / "scene.json").read_text())
    (copy / "model" / "scene.json").write_text(json.dumps({**meta, "stage": "joint"}))
    return copy


@pytest.mark.parametrize("command", [render_command, export_command, view_command])
def test_unfinished_fit_names_the_missing_stage(unfinished_scene, command, capsys):
    assert command.main(["--scene", str(unfinished_scene)]) == 2
    err = capsys.readouterr().err
    from recon4d.scene_folder import FIT_STAGES as STAGES

    assert "stage 'joint'" in err and ", ".join(STAGES[STAGES.index("joint"):]) in err and STAGES[-1] == "features"
    assert "recon4d fit --video" in err and "--resume" in err


def test_scene_without_a_model_or_priors(unfinished_scene, capsys):
    shutil.rmtree(unfinished_scene / "model")
    with pytest.raises(MissingStageError, match="optimisation .* has not run; run `recon4d fit"):
        load_fitted(unfinished_scene)
    shutil.rmtree(unfinished_scene / "priors")
    assert render_command.main(["--scene", str(unfinished_scene)]) == 2
    err = capsys.readouterr().err
    assert "camera.json is missing" in err and "--stop-after priors" in err
