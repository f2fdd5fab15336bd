"""The bench's error split: damage inside the moving objects' masks shows there and only there."""

from __future__ import annotations

import dataclasses

import torch
import torch.nn.functional as F

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


def test_a_shifted_frame_reads_as_a_shift_and_unresolved_texture_as_edge_error(fitted_left_scene):
    """The background's two limits are told apart: frames moved by 1.5 px (a camera off by that much) give
    a shift of about 1.5 px; fine texture in the frames that the render lacks (detail the fit has not
    resolved) leaves the shift near zero and puts the error on the most textured pixels."""
    _, scene_dir = fitted_left_scene
    data = load_scene_data(scene_dir)
    scene, _, _ = load_scene(SceneFolder(scene_dir).model)
    before = split_errors(scene, data)
    assert before["static_shift_px"] < 0.2  # exact priors: the fit sits on its frames

    frames = data.images.permute(0, 3, 1, 2)
    T, _, H, W = frames.shape
    ys, xs = torch.meshgrid(torch.arange(H) + 0.0, torch.arange(W) + 0.0, indexing="ij")
    grid = torch.stack([(xs - 1.5) / (W - 1) * 2 - 1, ys / (H - 1) * 2 - 1], -1)[None].expand(T, -1, -1, -1)
    shifted = F.grid_sample(frames, grid, align_corners=True, padding_mode="border").permute(0, 2, 3, 1)
    moved = split_errors(scene, dataclasses.replace(data, images=shifted.contiguous()))
    assert abs(moved["static_shift_px"] - 1.5) < 0.25

    checker = ((xs.long() // 2 + ys.long() // 2) % 2 * 2 - 1) * 0.15  # a checkerboard of 2-pixel squares ...
    patch = torch.zeros(H, W, dtype=torch.bool)
    patch[: H // 3, : W // 3] = True  # ... on one corner of the background
    textured = data.images.clone()
    textured[:, patch] = (textured[:, patch] + checker[patch][:, None]).clamp(0, 1)
    detail = split_errors(scene, dataclasses.replace(data, images=textured))
    assert detail["static_shift_px"] < 0.2
    assert detail["static_edge_err"] > 0.8 > before["static_edge_err"]
