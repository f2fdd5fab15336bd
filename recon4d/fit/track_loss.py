"""The scaffold's track term: each dynamic track's point, carried by the nodes from one frame to another.

Why every track and not only the reference frame's: flow-chained tracks end at occlusions and fast
motion and new ones are seeded later, so the tracks the reference frame sees are gone a few frames away
(measured in docs/decisions.md), and there the scaffold's motion had no track to follow, only the
images. Here each dynamic track is lifted with the depth prior at its *anchor*, the frame nearest the
reference where it is seen (the reference itself for the tracks it sees), and carried to any other
frame that sees it by the blend of its nearest nodes' motions between the two frames; the term is its
reprojection error there.

The anchor's side is held (no gradient through the anchor frame's node transforms): a frame is pulled
towards the frames nearer the reference, which more tracks tie down, and the ``motion`` stage, which
fits one frame's transforms at a time, keeps to that frame.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from recon4d.geometry import lift, quat_to_rotmat, sample_depth
from recon4d.scene.data import SceneData
from recon4d.scene.scaffold import MotionScaffold


@dataclass(frozen=True)
class AnchoredTracks:
    """The dynamic tracks seen in at least two training frames, each lifted at its anchor frame."""

    ids: Tensor
    """[n] track indices into the scene data's tracks."""
    anchor: Tensor
    """[n] the training frame nearest the reference frame (earlier on a tie) that sees the track."""
    points: Tensor
    """[n, 3] the track's point at its anchor frame, lifted with that frame's depth prior (world)."""
    sigma: float
    """Skinning falloff: twice the median distance from a canonical node to its nearest neighbour (the
    scene's ``SkinBinding.bind`` measures from its Gaussians to their nearest node instead: about the same
    for a dense set)."""

    @classmethod
    def from_data(cls, data: SceneData, ref: int, train_frames: list[int], node_pos: Tensor) -> "AnchoredTracks":
        seen = data.track_visible.clone()
        seen[[t for t in range(data.frames) if t not in train_frames]] = False  # a held-out frame anchors none
        ids = torch.nonzero(data.track_dynamic & (seen.sum(0) >= 2)).squeeze(1)
        distance = (torch.arange(data.frames, device=seen.device) - ref).abs().float()
        # earlier frame first on a tie: a frame's distance plus a tiebreak below 1 that grows with the frame
        order = distance + torch.arange(data.frames, device=seen.device) / (2 * data.frames)
        anchor = torch.where(seen[:, ids], order[:, None], float("inf")).argmin(0)
        xy = data.track_xy[anchor, ids]
        points = xy.new_zeros(len(ids), 3)
        for a in anchor.unique().tolist():
            at = anchor == a
            points[at] = lift(xy[at], sample_depth(data.depth[a], xy[at]), data.K, data.viewmats[a])
        spacing = torch.cdist(node_pos, node_pos).fill_diagonal_(float("inf")).min(1).values.median() \
            if len(node_pos) > 1 else node_pos.new_tensor(1.0)
        return cls(ids, anchor, points, float(spacing.clamp(min=1e-6)) * 2.0)


def carried(tracks: AnchoredTracks, scaffold: MotionScaffold, t: int, k: int) -> Tensor:
    """Each anchored point carried to frame ``t`` [n, 3]: the blend, over its ``k`` nearest nodes at its
    anchor frame, of each node's rigid motion from the anchor frame to ``t``; the anchor's side held."""
    k = min(k, len(scaffold))
    at_anchor = scaffold.node_positions().detach()[tracks.anchor]  # [n, M, 3]
    d2 = ((at_anchor - tracks.points[:, None]) ** 2).sum(-1)
    d2, near = torch.topk(d2, k, dim=1, largest=False)
    weights = torch.softmax(-d2 / (2 * tracks.sigma**2), dim=1)  # [n, k]
    from_pos = torch.gather(at_anchor, 1, near[..., None].expand(-1, -1, 3))
    from_rot = quat_to_rotmat(scaffold.node_quats.detach()[tracks.anchor[:, None], near])  # [n, k, 3, 3]
    local = (from_rot.transpose(-1, -2) @ (tracks.points[:, None] - from_pos)[..., None])[..., 0]
    # index_select, not [near]: indexing's backward adds into the nodes in an order that can change from run to run
    flat = near.reshape(-1)
    to_rot = quat_to_rotmat(torch.index_select(scaffold.node_quats[t], 0, flat)).reshape(*near.shape, 3, 3)
    to_pos = torch.index_select(scaffold.node_positions(t), 0, flat).reshape(*near.shape, 3)
    moved = (to_rot @ local[..., None])[..., 0] + to_pos  # [n, k, 3]
    return (weights[..., None] * moved).sum(1)


def track_loss(tracks: AnchoredTracks, data: SceneData, scaffold: MotionScaffold, t: int, view: Tensor,
               extent: float, k: int) -> Tensor:
    """Robust reprojection error at frame ``t`` of the anchored tracks that frame sees (other than at their
    anchor), in image widths: each capped at a fifth of the width, so that a few wrong tracks do not
    outweigh the rest, and Huber beyond a hundredth."""
    if len(tracks.ids) == 0:
        return torch.zeros((), device=data.K.device)
    cam = carried(tracks, scaffold, t, k) @ view[:3, :3].T + view[:3, 3]
    in_front = cam[:, 2] > 1e-3 * extent  # a point behind the camera has no reprojection
    uv = cam @ data.K.T
    uv = uv[:, :2] / uv[:, 2:3].clamp(min=1e-3 * extent)
    keep = (data.track_visible[t, tracks.ids] & (tracks.anchor != t) & in_front)[:, None].expand(-1, 2)
    err = ((uv - data.track_xy[t, tracks.ids]) / data.width).clamp(-0.2, 0.2)
    huber = F.huber_loss(err, torch.zeros_like(err), delta=0.01, reduction="none")
    # the mean over the kept tracks is masked, not gathered: a gather makes a GPU wait for the host
    return torch.where(keep, huber, 0.0).sum() / keep.sum().clamp(min=1)
