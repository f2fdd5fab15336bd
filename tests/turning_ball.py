"""A ball turning about its vertical axis before a wall under a still camera, with exact depth, masks and
tracks: the ground truth of the scaffold's initialisation and track-term tests."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from recon4d.scene.data import SceneData

CENTRE, RADIUS = torch.tensor([0.0, 0.0, 5.0]), 1.2


def turning_ball(T: int, degrees: float, W: int, H: int, f: float, tracks: int = 400):
    """A ball of radius ``RADIUS`` at ``CENTRE`` (depth 5) before a wall at depth 10, turning by ``degrees`` over the video:
    exact depth and masks, and ``tracks`` points of its surface, each visible where it faces the camera.
    Returns the data, the centre, the radius, each frame's rotation [T, 3, 3] and the tracked points'
    true positions [T, tracks, 3]."""
    K = torch.tensor([[f, 0, W / 2], [0, f, H / 2], [0, 0, 1.0]])
    centre, radius = CENTRE, RADIUS
    ys, xs = torch.meshgrid(torch.arange(H) + 0.5, torch.arange(W) + 0.5, indexing="ij")
    rays = torch.stack([xs, ys, torch.ones_like(xs)], -1) @ torch.linalg.inv(K).T  # camera depth 1
    # nearest hit of the ray s * ray with the ball: |s ray - c|^2 = r^2
    a, b, c = (rays * rays).sum(-1), -2 * rays @ centre, float(centre @ centre) - radius**2
    disc = b * b - 4 * a * c
    hit = disc > 0
    s = (-b - disc.clamp(min=0).sqrt()) / (2 * a)
    depth = torch.where(hit, s, torch.full_like(s, 10.0))  # the ray's z is 1, so its depth is s
    angles = torch.tensor(np.radians(np.linspace(0.0, degrees, T)), dtype=torch.float32)
    turns = torch.stack([torch.tensor([[torch.cos(g), 0, torch.sin(g)], [0, 1, 0], [-torch.sin(g), 0, torch.cos(g)]])
                         for g in angles])
    g = torch.Generator().manual_seed(0)
    surface = F.normalize(torch.randn(tracks, 3, generator=g), dim=-1) * radius
    points = centre + surface @ turns.transpose(1, 2)  # [T, tracks, 3]
    facing = ((points - centre) * -points).sum(-1) > 0
    uv = points @ K.T
    data = SceneData(
        images=torch.rand(T, H, W, 3, generator=g), K=K, viewmats=torch.eye(4).repeat(T, 1, 1),
        depth=depth.expand(T, H, W).clone(), dynamic_mask=hit.expand(T, H, W).clone(),
        track_xy=uv[..., :2] / uv[..., 2:], track_visible=facing, track_dynamic=torch.ones(tracks, dtype=torch.bool),
    )
    return data, centre, radius, turns, points
