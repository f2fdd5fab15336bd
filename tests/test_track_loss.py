"""The scaffold's track term reaches the frames the reference frame's tracks do not: a turning ball whose
first tracks end half-way and whose later ones start there."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from recon4d.fit.track_loss import AnchoredTracks, carried, track_loss
from recon4d.geometry import rotmat_to_quat
from recon4d.scene.data import SceneData
from recon4d.scene.scaffold import MotionScaffold

T, W, H, FOCAL = 9, 128, 96, 100.0
CENTRE, RADIUS = torch.tensor([0.0, 0.0, 5.0]), 1.2


def _turns(degrees: float) -> torch.Tensor:
    g = torch.tensor(np.radians(np.linspace(0.0, degrees, T)), dtype=torch.float32)
    c, s, o, i = torch.cos(g), torch.sin(g), torch.zeros(T), torch.ones(T)
    return torch.stack([torch.stack([c, o, s], -1), torch.stack([o, i, o], -1), torch.stack([-s, o, c], -1)], 1)


def _ball_with_short_tracks(degrees: float = 90.0):
    """A ball turning about its vertical axis under a still camera, exact depth; 300 surface points tracked
    in frames 0-4 and 300 others in frames 4-8, each where it faces the camera. Returns the data, each
    frame's rotation and each track's true position in every frame."""
    K = torch.tensor([[FOCAL, 0, W / 2], [0, FOCAL, H / 2], [0, 0, 1.0]])
    ys, xs = torch.meshgrid(torch.arange(H) + 0.5, torch.arange(W) + 0.5, indexing="ij")
    rays = torch.stack([xs, ys, torch.ones_like(xs)], -1) @ torch.linalg.inv(K).T
    a, b, c = (rays * rays).sum(-1), -2 * rays @ CENTRE, float(CENTRE @ CENTRE) - RADIUS**2
    disc = b * b - 4 * a * c
    hit = disc > 0
    depth = torch.where(hit, (-b - disc.clamp(min=0).sqrt()) / (2 * a), torch.full_like(a, 10.0))
    turns = _turns(degrees)
    surface = F.normalize(torch.randn(600, 3, generator=torch.Generator().manual_seed(0)), dim=-1) * RADIUS
    points = CENTRE + surface @ turns.transpose(1, 2)  # [T, 600, 3]
    facing = ((points - CENTRE) * -points).sum(-1) > 0
    facing[5:, :300] = False
    facing[:4, 300:] = False
    uv = points @ K.T
    data = SceneData(images=torch.zeros(T, H, W, 3), K=K, viewmats=torch.eye(4).repeat(T, 1, 1),
                     depth=depth.expand(T, H, W).clone(), dynamic_mask=hit.expand(T, H, W).clone(),
                     track_xy=uv[..., :2] / uv[..., 2:], track_visible=facing,
                     track_dynamic=torch.ones(600, dtype=torch.bool))
    return data, turns, points


def _scaffold(turns: torch.Tensor) -> MotionScaffold:
    """64 nodes inside the ball's shell, each following the ball's turn exactly."""
    nodes = CENTRE + F.normalize(torch.randn(64, 3, generator=torch.Generator().manual_seed(1)), dim=-1) * RADIUS * 0.9
    quats = rotmat_to_quat(turns)[:, None].expand(-1, 64, -1)
    trans = CENTRE - (turns @ CENTRE)  # [T, 3]: x_t = R_t x + CENTRE - R_t CENTRE
    return MotionScaffold(nodes, quats, trans[:, None].expand(-1, 64, -1))


def test_the_true_motion_carries_every_track_onto_its_path_in_every_frame():
    data, turns, points = _ball_with_short_tracks()
    tracks = AnchoredTracks.from_data(data, ref=0, train_frames=list(range(T)), node_pos=_scaffold(turns).node_pos)
    # each anchored at the first frame that sees it (the nearest to the reference frame, the first)
    assert torch.equal(tracks.anchor, data.track_visible[:, tracks.ids].float().argmax(0))
    assert (tracks.anchor[tracks.ids >= 300] >= 4).all()
    scaffold = _scaffold(turns)
    with torch.no_grad():
        for t in range(T):
            seen = data.track_visible[t, tracks.ids]
            off = (carried(tracks, scaffold, t, k=8) - points[t, tracks.ids])[seen].norm(dim=-1)
            # the depth map's pixel steps; a track first seen on the ball's outline is lifted onto the wall
            assert off.median() < 0.05 * RADIUS, (t, float(off.median()))


def test_the_term_alone_brings_a_frame_no_reference_track_reaches_onto_its_tracks():
    """Frame 8's nodes held at frame 4's transforms (what carrying a node without its tracks' turn left):
    only the tracks seeded at frame 4 or later see frame 8. Descending the track term on frame 8's
    transforms alone brings those tracks' carried points from 10 px or more off their tracks there to under
    1 px (the term is a reprojection: depth along the rays is left to the fit's depth term)."""
    data, turns, _ = _ball_with_short_tracks()
    scaffold = _scaffold(turns)
    with torch.no_grad():
        scaffold.node_quats[8] = scaffold.node_quats[4]
        scaffold.node_offsets[8] = scaffold.node_offsets[4]
    tracks = AnchoredTracks.from_data(data, ref=0, train_frames=list(range(T)), node_pos=scaffold.node_pos)
    seen = data.track_visible[8, tracks.ids]
    assert (tracks.ids[seen] >= 300).all()

    def pixels_off() -> float:
        with torch.no_grad():
            uv = carried(tracks, scaffold, 8, k=8) @ data.K.T
            return float((uv[:, :2] / uv[:, 2:] - data.track_xy[8, tracks.ids])[seen].norm(dim=-1).median())

    before = pixels_off()
    optimizer = torch.optim.Adam([scaffold.node_quats, scaffold.node_offsets], lr=5e-3)
    for _ in range(300):
        optimizer.zero_grad()
        track_loss(tracks, data, scaffold, 8, torch.eye(4), extent=5.0, k=8).backward()
        for p in (scaffold.node_quats, scaffold.node_offsets):  # frame 8's transforms alone
            p.grad[:8] = 0
        optimizer.step()
    assert before > 10 and pixels_off() < 1, (before, pixels_off())


def test_a_held_out_frame_anchors_no_track():
    data, turns, _ = _ball_with_short_tracks()
    tracks = AnchoredTracks.from_data(data, ref=0, train_frames=[t for t in range(T) if t != 4],
                                      node_pos=_scaffold(turns).node_pos)
    assert not (tracks.anchor == 4).any() and (tracks.anchor[tracks.ids >= 300] >= 5).all()
