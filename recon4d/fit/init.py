"""Initialise a DynamicScene from the priors: lift pixels with depth, seed the scaffold from tracks.

* Static Gaussians: non-dynamic pixels of a few keyframes, lifted with the depth prior,
  sized to their pixel footprint; then, frame by frame, the static pixels that none of
  the points so far projects near (``_uncovered``): what a panning or travelling camera
  sees only between the keyframes. Densification only splits and clones Gaussians that
  are already there, so a part of the background that no Gaussian starts in renders
  black in every frame that shows it.
* Dynamic Gaussians: dynamic pixels of the reference frame (the one with the most
  dynamic pixels), lifted the same way; that frame defines the canonical space. Then
  the dynamic pixels of a few other frames that no point so far covers there, taken
  back to the canonical space by the initial scaffold (``_dynamic_points``): a body
  that turns or moves shows sides the reference frame does not, and densification
  grows only from Gaussians already there.
* Scaffold nodes: farthest-point samples of the dynamic points. Each node's transform
  at frame t is the weighted Kabsch fit between the 3D positions (lifted tracks) of
  its nearest dynamic tracks at the reference frame and at t; frames where too few of
  them are visible are carried on from the neighbouring frame by the steps of the
  tracks visible there (``_chain_unsolved``). The ARAP pairs come from these initial
  trajectories (``topology.arap_edges``) and are stored with the scaffold.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from cuda_ext.knn import knn
from recon4d.fit.topology import arap_edges, farthest_points
from recon4d.geometry import kabsch, lift, quat_rotate, quat_to_rotmat, rotmat_to_quat, sample_depth
from recon4d.scene import DynamicScene, GaussianSet, MotionScaffold
from recon4d.scene.data import SceneData
from recon4d.scene.scaffold import SkinBinding

FOOTPRINT = 0.6  # a lifted point's size as a share of its stride cell's width at its depth (about its footprint)


@dataclass
class InitConfig:
    keyframes: int = 4
    """Frames whose static pixels seed the background."""
    static_stride: int = 2
    """Pixel stride when lifting static pixels."""
    dynamic_stride: int = 1
    dynamic_keyframes: int = 3
    """Frames besides the reference frame, spread over the video (the first and the last among them), whose
    dynamic pixels that no point so far covers there add dynamic Gaussians; 0: the reference frame's alone."""
    roundtrip_px: float = 1.0
    """Such a pixel is kept only where the scaffold takes its canonical point back to within this many
    pixels of where it was seen."""
    hidden_beyond: float = 0.05
    """A moved point covers a pixel only if it is not farther than the depth prior there by more than this
    fraction of it: the far side of a body that turned covers nothing."""
    max_nodes: int = 256
    points_per_node: int = 20
    """Roughly one node per this many dynamic Gaussians."""
    skin_k: int = 8
    tracks_per_node: int = 12
    arap_k: int = 5
    """ARAP neighbours per node and level (``topology.arap_edges``)."""
    arap_levels: int = 1
    """Levels of the ARAP graph: all nodes, then a quarter as many per level (the reference systems'
    multi-level ARAP). One by default: a coarse pair spans a trunk and a leg, which are not rigid
    together (docs/decisions.md)."""
    latent_dim: int = 0



def _pixels(mask: Tensor, stride: int) -> Tensor:
    grid = torch.zeros_like(mask)
    grid[stride // 2::stride, stride // 2::stride] = True
    ys, xs = torch.nonzero(mask & grid, as_tuple=True)
    return torch.stack([xs, ys], 1)


def _lift_pixels(data: SceneData, t: int, mask: Tensor, stride: int) -> tuple[Tensor, Tensor, Tensor]:
    px = _pixels(mask & (data.depth[t] > 0), stride)
    d = data.depth[t, px[:, 1], px[:, 0]]
    pts = lift(px.float() + 0.5, d, data.K, data.viewmats[t])
    rgb = data.images[t, px[:, 1], px[:, 0]]
    size = d / data.K[0, 0] * stride * FOOTPRINT
    return pts, rgb, size





def node_trajectories(data: SceneData, nodes: Tensor, ref: int, cfg: InitConfig) -> tuple[Tensor, Tensor]:
    """Per-frame rigid transforms [T,M,4], [T,M,3] of the nodes from the dynamic tracks, on the nodes' device.

    Frames where a node keeps at least 3 of its reference tracks are solved by
    weighted Kabsch from the reference frame, all nodes and frames in one batch
    (a track's weight falls off with its distance to the node; a track out of view
    weighs nothing); the others are carried from their neighbour (``_chain_unsolved``).
    """
    T, M = data.frames, len(nodes)
    quats = nodes.new_tensor([1.0, 0, 0, 0]).repeat(T, M, 1)
    trans = nodes.new_zeros(T, M, 3)
    tracks = torch.nonzero(data.track_dynamic & data.track_visible[ref]).squeeze(1)
    if len(tracks) < 3:
        return quats, trans
    points = torch.stack([lift(xy, sample_depth(data.depth[t], xy), data.K, data.viewmats[t])
                          for t, xy in enumerate(data.track_xy[:, tracks])])  # [T, tracks, 3]
    k = min(cfg.tracks_per_node, len(tracks))
    near, d2 = knn(nodes.contiguous(), points[ref].contiguous(), k)
    near = near.long()  # [M, k]
    falloff = torch.exp(-d2 / (2 * d2.median(dim=1, keepdim=True).values.clamp(min=1e-8))) + 1e-6
    visible = data.track_visible[:, tracks][:, near]  # [T, M, k]
    solved = visible.sum(-1) >= 3
    solved[ref] = False  # the reference frame is the identity
    weights = torch.where(solved[..., None], falloff * visible, torch.ones_like(falloff))  # unsolved: discarded
    rot, tr = kabsch(points[ref][near].expand(T, -1, -1, -1), points[:, near], weights)
    quats = torch.where(solved[..., None], rotmat_to_quat(rot), quats)
    trans = torch.where(solved[..., None], tr, trans)
    solved[ref] = True
    _chain_unsolved(data, nodes, quats, trans, solved, ref, cfg)
    return quats, trans


def _chain_unsolved(data: SceneData, nodes: Tensor, quats: Tensor, trans: Tensor, solved: Tensor, ref: int,
                    cfg: InitConfig) -> None:
    """Carry each node outward from the reference frame through frames its reference tracks do not reach.

    Why: flow-chained tracks end at occlusions and fast motion and new ones are
    seeded later, so far from the reference frame few or none of a node's tracks
    are left; holding the last solved pose there leaves a fast object (a jumping
    horse) where it was (on DAVIS horsejump-high, 0-10% of the nodes were still
    on the horse in the last 12 frames; 45-60% with this). Instead, an unsolved
    frame moves the node by the median 3D step, from the frame before it (outward
    from the reference), of its ``tracks_per_node`` nearest dynamic tracks visible
    in both frames, whichever frame they were seeded in; its rotation is held.
    With fewer than 3 such tracks in the frame the node keeps its pose.
    """
    dynamic = data.track_dynamic
    for step in (1, -1):
        t = ref + step
        while 0 <= t < data.frames:
            prev = t - step
            todo = ~solved[t]
            if todo.any():
                pos_prev = (quat_rotate(quats[prev], nodes) + trans[prev])[todo]
                quats[t, todo], trans[t, todo] = quats[prev, todo], trans[prev, todo]
                both = torch.nonzero(dynamic & data.track_visible[prev] & data.track_visible[t]).squeeze(1)
                if len(both) >= 3:
                    xy_p, xy_t = data.track_xy[prev, both], data.track_xy[t, both]
                    p_prev = lift(xy_p, sample_depth(data.depth[prev], xy_p), data.K, data.viewmats[prev])
                    p_t = lift(xy_t, sample_depth(data.depth[t], xy_t), data.K, data.viewmats[t])
                    k = min(cfg.tracks_per_node, len(both))
                    near, _ = knn(pos_prev.contiguous(), p_prev.contiguous(), k)
                    steps = (p_t - p_prev)[near.long()]  # [m, k, 3]
                    trans[t, todo] += steps.median(dim=1).values
            t += step


def _uncovered(data: SceneData, t: int, points: Tensor, stride: int, hidden_beyond: float | None = None) -> Tensor:
    """Pixels ``[H, W]`` of frame ``t`` whose ``stride`` cell, and every cell next to it, no point of
    ``points`` projects into (the slack of one cell: a lifted point covers about its own cell).

    ``hidden_beyond``: a point farther than the depth prior where it projects, by more than this fraction of
    that depth, is hidden there and covers nothing (the far side of a body that has turned)."""
    H, W = data.height, data.width
    cam = points @ data.viewmats[t, :3, :3].T + data.viewmats[t, :3, 3]
    cam = cam[cam[:, 2] > 0]
    uv = cam @ data.K.T
    cells = (uv[:, :2] / uv[:, 2:] / stride).floor().long()
    rows, cols = -(-H // stride), -(-W // stride)
    inside = (cells[:, 0] >= 0) & (cells[:, 0] < cols) & (cells[:, 1] >= 0) & (cells[:, 1] < rows)
    if hidden_beyond is not None:
        px = (uv[:, :2] / uv[:, 2:]).floor().long()
        px = torch.stack([px[:, 0].clamp(0, W - 1), px[:, 1].clamp(0, H - 1)], 1)
        inside &= cam[:, 2] <= data.depth[t, px[:, 1], px[:, 0]] * (1 + hidden_beyond)
    hit = points.new_zeros(rows, cols)
    hit[cells[inside, 1], cells[inside, 0]] = 1.0
    near = torch.nn.functional.max_pool2d(hit[None, None], 3, stride=1, padding=1)[0, 0] > 0
    return ~near.repeat_interleave(stride, 0)[:H].repeat_interleave(stride, 1)[:, :W]


def _static_points(data: SceneData, keys: list[int], held_out: frozenset[int], stride: int
                   ) -> tuple[Tensor, Tensor, Tensor]:
    """Static pixels of the keyframes, then of each other frame (outside ``held_out``) where uncovered."""
    static_mask = ~data.dynamic_mask
    lifted = [_lift_pixels(data, t, static_mask[t], stride) for t in dict.fromkeys(keys)]
    points = torch.cat([pts for pts, _, _ in lifted])
    for t in range(data.frames):
        if t in keys or t in held_out:
            continue
        pts, rgb, size = _lift_pixels(data, t, static_mask[t] & _uncovered(data, t, points, stride), stride)
        if len(pts):
            lifted.append((pts, rgb, size))
            points = torch.cat([points, pts])
    return tuple(torch.cat(x) for x in zip(*lifted))


def _nearest_kept(t: int, frames: int, held_out: frozenset[int]) -> int:
    """Frame ``t``, or the nearest frame (earlier first) that is not held out."""
    for offset in range(frames):
        for cand in (t - offset, t + offset):
            if 0 <= cand < frames and cand not in held_out:
                return cand
    raise ValueError("every frame is held out")


def initial_scene(data: SceneData, cfg: InitConfig, held_out: frozenset[int] = frozenset(),
                  skin_mode: str = "dqb") -> DynamicScene:
    """The starting scene, its colours lifted from frames outside ``held_out`` only (a held-out frame's pixels
    must reach the model through no path, or its PSNR would measure memorising)."""
    T = data.frames
    keys = torch.linspace(0, T - 1, min(cfg.keyframes, T)).round().long().unique().tolist()
    keys = [_nearest_kept(t, T, held_out) for t in keys]
    s_pts, s_rgb, s_size = _static_points(data, keys, held_out, cfg.static_stride)
    static = GaussianSet(s_pts, s_size[:, None].repeat(1, 3), s_rgb, s_pts.new_full((len(s_pts),), 0.9),
                         latent_dim=cfg.latent_dim)

    area = data.dynamic_mask.flatten(1).sum(1)
    area[list(held_out)] = -1
    ref = int(area.argmax())
    d_pts, d_rgb, d_size = _lift_pixels(data, ref, data.dynamic_mask[ref], cfg.dynamic_stride)
    if len(d_pts) == 0:  # a static video: one idle node keeps the model uniform
        nodes = s_pts[:1].clone()
    else:
        m = max(1, min(cfg.max_nodes, len(d_pts) // cfg.points_per_node))
        nodes = d_pts[farthest_points(d_pts, m)]
    quats, trans = node_trajectories(data, nodes, ref, cfg)
    scaffold = MotionScaffold(nodes, quats, trans, latent_dim=cfg.latent_dim)
    scaffold.arap_edges = arap_edges(scaffold.node_positions().detach(), cfg.arap_k, cfg.arap_levels)
    if len(d_pts) and cfg.dynamic_keyframes > 0:
        frames = torch.linspace(0, T - 1, min(cfg.dynamic_keyframes, T)).round().long().unique().tolist()
        others = [t for t in dict.fromkeys(_nearest_kept(t, T, held_out) for t in frames) if t != ref]
        d_pts, d_rgb, d_size = _dynamic_points(data, scaffold, others, (d_pts, d_rgb, d_size), cfg, skin_mode)
    dynamic = GaussianSet(d_pts, d_size[:, None].repeat(1, 3), d_rgb, d_pts.new_full((len(d_pts),), 0.9))
    binding = SkinBinding.bind(d_pts if len(d_pts) else nodes[:0], nodes, k=cfg.skin_k)
    return DynamicScene(static, dynamic, scaffold, binding, skin_mode=skin_mode, reference_frame=ref)


def _dynamic_points(data: SceneData, scaffold: MotionScaffold, frames: list[int],
                    lifted: tuple[Tensor, Tensor, Tensor], cfg: InitConfig, skin_mode: str
                    ) -> tuple[Tensor, Tensor, Tensor]:
    """The reference frame's dynamic points ``lifted`` (canonical), then, frame by frame, the dynamic pixels
    of ``frames`` that none of the points so far covers there, each taken back to the canonical space.

    A pixel seen at frame t is taken back by the blend of the inverse transforms of its nearest nodes at t
    (skinning weights from its distance to them there), and kept only where skinning the canonical point
    forward lands within ``roundtrip_px`` of where it was seen: between nodes whose transforms disagree
    (two limbs, a node carried off by a lost track) no canonical point explains the pixel, and one placed
    anyway would draw a ghost in every other frame."""
    points, colours, sizes = lifted
    for t in frames:
        moved = _skinned(points, scaffold, t, cfg.skin_k, skin_mode)
        mask = data.dynamic_mask[t] & _uncovered(data, t, moved, cfg.dynamic_stride, cfg.hidden_beyond)
        seen, rgb, size = _lift_pixels(data, t, mask, cfg.dynamic_stride)
        if len(seen) == 0:
            continue
        canon = _taken_back(seen, scaffold, t, cfg.skin_k)
        error = (_skinned(canon, scaffold, t, cfg.skin_k, skin_mode) - seen).norm(dim=-1)
        pixel = size / (FOOTPRINT * cfg.dynamic_stride)  # the length of one pixel at the point's depth
        keep = error <= cfg.roundtrip_px * pixel
        points, colours, sizes = (torch.cat([a, b[keep]]) for a, b in ((points, canon), (colours, rgb), (sizes, size)))
    return points, colours, sizes


def _skinned(canon: Tensor, scaffold: MotionScaffold, t: int, k: int, skin_mode: str) -> Tensor:
    """Canonical points moved to frame t, bound to their nearest nodes as the scene will bind them."""
    ident = canon.new_tensor([1.0, 0, 0, 0]).expand(len(canon), 4)
    with torch.no_grad():
        return SkinBinding.bind(canon, scaffold.node_pos, k=k).deform(canon, ident, scaffold, t, skin_mode)[0]


def _taken_back(seen: Tensor, scaffold: MotionScaffold, t: int, k: int) -> Tensor:
    """Points seen at frame t in the canonical space: each nearest node's inverse transform at t, blended
    by the skinning weights of the point's distances to those nodes at t."""
    with torch.no_grad():
        binding = SkinBinding.bind(seen, scaffold.node_positions(t), k=k)
        ids, weights = binding.node_ids.long(), binding.weights()
        rot = quat_to_rotmat(torch.nn.functional.normalize(scaffold.node_quats[t], dim=-1))[ids]  # [N, K, 3, 3]
        local = ((seen[:, None] - scaffold.translations(t)[ids])[..., None, :] @ rot)[..., 0, :]  # R^T (p - t)
        return (weights[..., None] * local).sum(1)
