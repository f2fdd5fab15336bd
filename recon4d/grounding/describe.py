"""Compact, deterministic text describing each object's trajectory: the `raw+cues` prompt material.

Why text: the VLMs under study name "which way is it moving / turning / is it
following" near chance, while the reconstruction already knows the geometry.
These lines put it in words a prompt can carry, with the numbers beside the
words so a reader can check them. Same scene in, same text out (fixed rounding,
fixed order), so an ablation that adds the cues is reproducible.
"""

from __future__ import annotations

import numpy as np

from recon4d.grounding.rules import clear_seen_spin, seen_approach, seen_straight
from recon4d.grounding.trajectories import NOT_ROTATING_DEG, ROTATING_DEG, ObjectTrack, SceneTracks, heading_offset_deg

FOLLOW_MAX_DEG = 60.0  # a follower heads within this angle of its leader
APPROACH_SHARE = 0.2  # distance between two objects changes by this share: approaching / separating


def displacement_words(track: ObjectTrack) -> str:
    """Net displacement in camera terms, largest component first; without depth evidence (the offline
    sparse depth) the travel in depth is left out, as the answerer leaves it out (``rules.direction``)."""
    m, depth_evidence = track.motion, track.depth_evidence
    if not m.moving:
        return f"stays in place (centre within {m.reach:.2f}, object size {m.size:.2f})"
    parts = [(abs(m.lateral), "right" if m.lateral > 0 else "left"),
             (abs(m.rise), "up" if m.rise > 0 else "down")]
    if depth_evidence:
        parts.append((abs(m.depth), "away from the camera" if m.depth > 0 else "towards the camera"))
    parts.sort(key=lambda p: -p[0])
    named = [f"{word} {amount:.2f}" for amount, word in parts if amount >= 0.25 * parts[0][0]]
    unknown = "" if depth_evidence else "; its travel in depth is not measured (offline depth)"
    return f"moves {', '.join(named)} (path {m.path:.2f}, object size {m.size:.2f}){unknown}"


def turning_words(track: ObjectTrack, viewmats: np.ndarray) -> str:
    """Heading change for a moving object (none where a camera that stays put sees it go straight, as the
    answerer takes it: ``rules.seen_straight``), spin for one that stays in place."""
    m = track.motion
    yaw = m.yaw_deg
    if seen_straight(track, viewmats) is not None:
        return f"goes straight as seen by the camera, which stays put (its fitted path turns {yaw:+.0f} deg)"
    if m.moving and not m.turn_known:
        return "turns by an amount the path cannot show (a half of it travels under half the object's size)"
    if abs(yaw) < NOT_ROTATING_DEG:
        return f"{'keeps its heading' if m.moving else 'does not rotate'} (yaw {yaw:+.0f} deg)"
    sense = "left" if yaw > 0 else "right"
    seen = "counter-clockwise" if m.seen_rotation_deg > 0 else "clockwise"
    unsure = "" if abs(yaw) >= ROTATING_DEG else ", barely"
    if m.moving:
        return f"turns {sense} by {abs(yaw):.0f} deg{unsure} ({seen} as seen by the camera)"
    return f"spins {seen} as seen by the camera, {abs(yaw) / 360:.2f} turns ({abs(yaw):.0f} deg){unsure}"


def spin_words(track: ObjectTrack) -> str:
    """The turn seen across the outline of a body that stays in place in the image, as ``rules.rotation`` reads it."""
    turns = clear_seen_spin(track)
    if turns is None:
        return ""
    return f"seen to spin {'counter-clockwise' if turns > 0 else 'clockwise'} {abs(turns):.2f} turns across its outline"


def size_words(track: ObjectTrack, viewmats: np.ndarray) -> str:
    """The apparent size's change over the clip where the id masks show it, as ``rules.distance`` reads it."""
    way, scale = seen_approach(track, viewmats)
    if way is None:
        return ""
    return f"looks {scale:.2f}x as big at the end ({'coming closer' if way == 'towards' else 'going away'})"


def speed_words(track: ObjectTrack) -> str:
    """Speed profile: steady, speeding up, slowing down or varying, with the mean per frame."""
    s = track.motion.speeds
    if not track.motion.moving or len(s) < 4:
        return ""
    half = len(s) // 2
    first, second = float(s[:half].mean()), float(s[half:].mean())
    cv = float(s.std() / max(s.mean(), 1e-9))
    if second > 1.3 * first:
        shape = "speeding up"
    elif second < first / 1.3:
        shape = "slowing down"
    else:
        shape = "steady speed" if cv < 0.35 else "uneven speed"
    return f"{shape} ({s.mean():.3f} per frame, first half {first:.3f}, second half {second:.3f})"


def relation_words(a: ObjectTrack, b: ObjectTrack, up: np.ndarray) -> list[str]:
    """Relations of object b to object a: following at a heading offset, approaching or separating."""
    out = []
    if a.motion.moving and b.motion.moving:
        offset = heading_offset_deg(a, b, up)
        behind = float(np.mean(b.in_heading_frame(a.centres, up)[:, 0])) > 0  # a lies ahead of b
        side = "left" if offset > 0 else "right"
        if abs(offset) <= FOLLOW_MAX_DEG and behind:
            out.append(f"{b.obj.label} follows {a.obj.label} at a heading offset of {abs(offset):.0f} deg to its {side}")
        else:
            out.append(f"{b.obj.label} heads {abs(offset):.0f} deg to the {side} of {a.obj.label}'s direction")
    gap = np.linalg.norm(a.centres - b.centres, axis=1)
    change = (gap[-1] - gap[0]) / max(gap[0], 1e-9)
    if change <= -APPROACH_SHARE:
        out.append(f"{a.obj.label} and {b.obj.label} approach each other (gap {gap[0]:.2f} -> {gap[-1]:.2f})")
    elif change >= APPROACH_SHARE:
        out.append(f"{a.obj.label} and {b.obj.label} move apart (gap {gap[0]:.2f} -> {gap[-1]:.2f})")
    return out


def describe(st: SceneTracks) -> str:
    """The whole scene as a few lines of text (one per object, then relations)."""
    if not st.tracks:
        return "No moving objects were found in the reconstruction."
    lines = [f"Moving objects (directions from the camera; distances in scene units; up from the {st.up_source}):"]
    for tr in st.tracks:
        parts = [displacement_words(tr), size_words(tr, st.viewmats), turning_words(tr, st.viewmats),
                 spin_words(tr), speed_words(tr)]
        lines.append(f"- {tr.obj.label}: " + "; ".join(p for p in parts if p) + ".")
        if st.global_viewmat is not None and tr.motion.moving:
            net = tr.centres_in(st.global_viewmat)
            d = net[-1] - net[0]
            lines.append(f"  in the global view: {'right' if d[0] > 0 else 'left'} {abs(d[0]):.2f}, "
                         f"{'away' if d[2] > 0 else 'towards'} {abs(d[2]):.2f}.")
    for i, a in enumerate(st.tracks):
        for b in st.tracks[i + 1:]:
            for line in relation_words(a, b, st.up):
                lines.append(f"- {line}.")
    return "\n".join(lines)

