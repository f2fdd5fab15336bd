"""Where an object is in each frame as the input shows it: its id mask lifted with the fit's rendered depth.

Why not the fitted Gaussians: a fit explains part of an evenly coloured spinning
object with static Gaussians and lets its dynamic Gaussians smear, so any centre
taken from them (a centroid, or the body point of per-frame rigid fits) wanders
by up to a few object sizes and a spinning object reads as travelling. The id
mask says exactly where the object is seen, and the fitted scene rendered at
that frame's (fitted) camera says how far away; the rendered depth is the
whole scene's, so it does not depend on how the fit shared the object out
among static and dynamic Gaussians, only on where it put surface.

Why the rendered depth and not the depth prior: the answers are to come from
the fitted scene. The prior is only the fit's supervision, and under
``--priors gt`` it is exact ground-truth depth, which would measure reading the
input rather than the reconstruction.

How: in each frame that shows the object whole (``shape.whole_frames``: off the
image border and touching no nearer object, so that the mask is not cut), the
centre is the mask's median viewing ray taken to the object's front depth: the
``FRONT_QUANTILE`` quantile of the rendered depth over the mask's nearly opaque
pixels, pushed back by half the object's apparent radius towards its body
centre. Not the median depth: a fit of an evenly coloured spinning object has
holes through which the background shows, more in some frames than in others,
and they pull a median depth away by several per cent while the nearest quarter
of the mask stays on the object (on fitted synth pairs, the median made still
spinning objects read as moving: 96.6% right against 99.2%). The push back
matters for lateral motion: a centre taken at the front is nearer the camera,
so its lateral travel shrinks by front/centre depth (5% short on a synth ball
with exact depth); half a radius removes most of that without letting the
mask's changing area (a spinning cube's) add noise. Frames
that do not show the object whole are filled in along the clip from those that
do, and a running median over ``SMOOTH_FRAMES`` frames removes the frame-to-frame
wobble of the rendered depth (a smeared spinning object's depth jumps from one
frame to the next), which would otherwise add up to a path and make a still
object read as moving; a real motion lasting more than a few frames passes it.

The apparent size (``seen_sizes``) is the other thing the masks show directly:
for a rigid body the distance to the camera is inversely proportional to it,
so "coming closer or going further away" needs no depth at all. The fit's
depth is the monocular prior's, and on real clips its change over the clip
can point the wrong way: on DAVIS libby the fitted dog comes nearer while its
annotated mask shrinks to a third of its area (the dog runs away).

An object that is never seen whole often enough (it stays behind a nearer one
it touches) is measured in every frame that has it inside the image, cut mask
and all: the cut moves its centre by less than its size, while the fallback,
the fit's own Gaussians, wanders by more (on held-out fitted synth pairs this
took the answers from 89.1% to 93.1% right).
"""

from __future__ import annotations

import numpy as np

from recon4d.grounding.shape import whole_frames

MIN_WHOLE = 0.5  # share of the frames that must show the object whole for its seen centres to be used
MIN_DEPTH_PIXELS = 4  # mask pixels with a valid depth a frame needs
SMOOTH_FRAMES = 5  # running-median window (frames) over the centres; odd
FRONT_QUANTILE = 0.25  # depth quantile over the mask taken as the object's front (0.2-0.35 score the same)
BEHIND_FRONT = 0.5  # radii from the front to the centre estimate (0 and 0.5 score the same on fitted pairs, 0.8 worse)
MIN_ALPHA = 0.9  # rendered opacity a pixel needs for the fit's expected depth there to be trusted
MIN_SPIN_PIXELS = 50  # outline pixels a frame pair needs for its spin (below, the flow's patches span the outline)


def rendered_depth(scene, data) -> np.ndarray:
    """The fitted scene's expected depth ``[T, H, W]`` at each input camera, NaN where its opacity is low.

    Rendered with the fit's own (refined) cameras ``data.viewmats`` at the input
    resolution, so that ``data.K`` is its intrinsics. Where the accumulated
    opacity is below ``MIN_ALPHA`` the expected depth is an average over too
    little of the scene (0 where empty) and is dropped.
    """
    import torch

    from recon4d.render.rasterize import rasterize

    frames = []
    with torch.no_grad():
        for t in range(data.frames):
            out = rasterize(*scene.at(t).as_args(), data.viewmats[t:t + 1], data.K[None], data.width, data.height)
            depth, alpha = out.depth[0, ..., 0].numpy(), out.alpha[0, ..., 0].numpy()
            frames.append(np.where(alpha >= MIN_ALPHA, depth, np.nan))
    return np.stack(frames)


def seen_sizes(masks: np.ndarray, mask_id: int, depths: dict[int, np.ndarray]) -> np.ndarray:
    """Apparent linear size ``[T]`` of object ``mask_id`` (square root of its mask's pixel count, in mask
    pixels) in each frame that shows it whole (``shape.whole_frames``), NaN in the others (cut masks shrink)."""
    sizes = np.full(len(masks), np.nan)
    for t in whole_frames(masks, mask_id, depths):
        sizes[t] = np.sqrt(np.count_nonzero(masks[t] == mask_id))
    return sizes


def visible_sizes(masks: np.ndarray, mask_id: int) -> np.ndarray:
    """Linear size ``[T]`` of the part of object ``mask_id`` each frame shows (square root of its pixel count,
    0 where absent): cut by the image's edge or partly hidden, an object looks no bigger than it is, so this is
    a lower bound of its apparent size where ``seen_sizes`` has none."""
    return np.sqrt((masks == mask_id).reshape(len(masks), -1).sum(1).astype(np.float64))


def seen_spin(masks: np.ndarray, mask_id: int, flow: np.ndarray) -> np.ndarray:
    """Turn ``[T-1]`` of object ``mask_id`` about the image's vertical from frame t to t+1 (radians, + =
    counter-clockwise seen from above), read off the forward optical flow ``[T-1, H, W, 2]`` across its
    outline; NaN where a frame pair does not show it.

    Why: a body that spins where it stands (a dancer) is smeared by the fit, and the rotation of its
    dynamic Gaussians misses the spin (DAVIS breakdance-flare: 0.04 turns fitted where the dancer spins
    twice), while the image shows it plainly: the near side of a body turning about a vertical axis
    sweeps across the outline, which itself stays put. A cylinder of radius r turning by w moves its
    visible surface sideways by w r cos(theta), on average (pi/4) w r over its width. So the mean
    horizontal flow inside the mask, less the outline's own travel (its centroid's), over pi/4 of its
    half width (the median over rows of the mask's width, halved) is the turn. It reads low where limbs
    widen the outline and where the flow smooths a fast spin; a walking or running body's legs and a
    shrinking outline add a drift of their own (DAVIS libby's dog running away: 1.3 turns), so the
    rules read it only for a body that stays in place.
    """
    H, W = flow.shape[1:3]
    rows = ((np.arange(H) + 0.5) * masks.shape[1] / H).astype(np.int64)
    cols = ((np.arange(W) + 0.5) * masks.shape[2] / W).astype(np.int64)
    shown = masks[:, rows][:, :, cols] == mask_id  # at the flow's resolution, each frame once
    spin = np.full(len(flow), np.nan)
    for t in range(min(len(flow), len(masks) - 1)):
        now, after = shown[t], shown[t + 1]
        if now.sum() < MIN_SPIN_PIXELS or after.sum() < MIN_SPIN_PIXELS:
            continue
        ys, xs = np.nonzero(now)
        travel = np.nonzero(after)[1].mean() - xs.mean()
        filled = now.any(1)
        widths = W - np.argmax(now[filled, ::-1], 1) - np.argmax(now[filled], 1)
        sweep = float(flow[t, ys, xs, 0].astype(np.float64).mean()) - travel
        spin[t] = sweep / (np.pi / 4 * np.median(widths) / 2)
    return spin


def seen_centres(masks: np.ndarray, mask_id: int, K: np.ndarray, viewmats: np.ndarray, depth: np.ndarray,
                 depths: dict[int, np.ndarray], depth_from_size: bool = False) -> np.ndarray | None:
    """World centre ``[T, 3]`` of object ``mask_id`` per frame, or None when too few frames show it.

    ``masks`` are the id masks ``[T, Hm, Wm]``; ``K`` the intrinsics at the
    resolution of ``depth`` ``[T, H, W]`` (``rendered_depth``; NaN or <= 0 where
    unknown); ``depths`` the per-frame camera depth of every mask id (for
    ``whole_frames``' occlusion order). ``depth_from_size``: the fit's depth holds
    no information on the object's own distance (a constant depth prior: a camera that does not translate
    and no depth model; or the offline sparse depth, which gives a moving object the depth of the static
    surface around it), so the distance changes with the inverse apparent size (the square
    root of the mask's area, its quadratic trend over the clip) about the fitted depth's
    median, as a rigid body's does.
    """
    T, H, W = depth.shape
    rows = ((np.arange(H) + 0.5) * masks.shape[1] / H).astype(np.int64)
    cols = ((np.arange(W) + 0.5) * masks.shape[2] / W).astype(np.int64)
    centres = np.full((T, 3), np.nan)
    frames = whole_frames(masks, mask_id, depths)
    if len(frames) < max(2, MIN_WHOLE * T):
        frames = whole_frames(masks, mask_id, depths, behind_ok=True)
    rays, fronts, areas = {}, {}, {}
    for t in frames:
        ys, xs = np.nonzero(masks[t][rows][:, cols] == mask_id)
        z = depth[t, ys, xs].astype(np.float64)
        ok = np.isfinite(z) & (z > 0)
        if ok.sum() < MIN_DEPTH_PIXELS:
            continue
        pix = np.stack([xs[ok] + 0.5, ys[ok] + 0.5, np.ones(ok.sum())])
        rays[t] = np.median(np.linalg.solve(K, pix).T, axis=0)  # at unit camera depth: times z puts it at depth z
        fronts[t] = np.quantile(z[ok], FRONT_QUANTILE)
        areas[t] = len(ys)
    if depth_from_size and len(fronts) >= 3:
        # The trend of the log area, quadratic over the clip: a mask's pixel count wobbles by a few per cent
        # from frame to frame (a 15-pixel ball), which as distance would make a straight path zig-zag.
        ts = np.array(sorted(areas))
        trend = np.polyval(np.polyfit(ts, np.log([areas[t] for t in ts]), 2), ts)
        front = np.median(list(fronts.values()))
        fronts = {t: front * np.exp(0.5 * (np.median(trend) - a)) for t, a in zip(ts, trend)}
    for t, ray in rays.items():
        radius = np.sqrt(areas[t] / np.pi) / K[0, 0] * fronts[t]  # the mask's equal-area radius, in scene units
        cam = ray * (fronts[t] + BEHIND_FRONT * radius)
        centres[t] = viewmats[t, :3, :3].T @ (cam - viewmats[t, :3, 3])
    seen = np.nonzero(np.isfinite(centres[:, 0]))[0]
    if len(seen) < max(2, MIN_WHOLE * T):
        return None
    frames = np.arange(T)
    filled = np.stack([np.interp(frames, seen, centres[seen, k]) for k in range(3)], axis=1)
    if SMOOTH_FRAMES > 1:
        # Ends padded by point reflection about the end frames, so that a steady motion keeps its
        # full length (a window cut short at an end would pull the end centres inwards).
        h = min(SMOOTH_FRAMES // 2, T - 1)
        padded = np.concatenate([2 * filled[0] - filled[h:0:-1], filled, 2 * filled[-1] - filled[-2:-h - 2:-1]])
        filled = np.stack([np.median(padded[t:t + 2 * h + 1], axis=0) for t in range(T)])
    return filled
