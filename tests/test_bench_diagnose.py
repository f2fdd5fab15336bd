"""The bench's error split: damage inside the moving objects' masks shows there and only there."""

from __future__ import annotations

import dataclasses

from recon4d.bench.diagnose import error_split, split_errors
from recon4d.scene.data import load_scene_data
from recon4d.scene.state import load_scene
from recon4d.scene_folder import SceneFolder


def test_error_inside_the_dynamic_mask_is_counted_there_and_nowhere_else(fitted_left_scene):
    _, scene_dir = fitted_left_scene
    data = load_scene_data(scene_dir)
    before = error_split(scene_dir)
    masks = data.dynamic_mask
    assert abs(before["dynamic_px"] - float(masks.float().mean())) < 1e-9
    assert before["uncovered"] < 0.01  # exact priors: the fit covers its frames
    assert before["psnr_static"] > 30 and before["psnr_dynamic"] > 20

    images = data.images.clone()
    images[masks] = 1 - images[masks]  # inverted colours on the moving object only
    scene, _, _ = load_scene(SceneFolder(scene_dir).model)
    after = split_errors(scene, dataclasses.replace(data, images=images))
    assert after["psnr_static"] == before["psnr_static"]  # not a pixel outside the masks changed
    assert after["psnr_dynamic"] < before["psnr_dynamic"] - 5
    assert after["dynamic_err"] > before["dynamic_err"]
    assert after["uncovered"] == before["uncovered"]
