"""The scaffold's track term reaches the frames the reference frame's tracks do not: a turning ball whose
first tracks end half-way and whose later ones start there."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from recon4d.fit.track_loss import AnchoredTracks, carried, track_loss
from recon4d.geometry import rotmat_to_quat
from recon4d.scene.scaffold import MotionScaffold
from tests.turning_ball import CENTRE, RADIUS, turning_ball

T = 9


def _ball_with_short_tracks():
    """The turning ball (a quarter turn) with 600 surface points: the first 300 tracked in frames 0-4 and
    the others in frames 4-8, each where it faces the camera. Returns the data, each
    frame's rotation and each track's true position in every frame."""
    data, _, _, turns, points = turning_ball(T=T, degrees=90.0, W=128, H=96, f=100.0, tracks=600)
    data.track_visible[5:, :300] = False
    data.track_visible[:4, 300:] = False
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
