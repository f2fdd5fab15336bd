"""Event-count rules: how many times an object moved, jumped, turned or revolved, or None with the reason.

Why apart from :mod:`recon4d.grounding.rules`: a count reads a signal's swings
(a hysteresis zig-zag over the whole clip) rather than one net displacement, and
the counts share that one tool; the single-answer rules do not need it.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from recon4d.geometry import camera_centres
from recon4d.grounding.rules import OPPOSITE, SPIN_DEG, clear_seen_spin, moves_towards
from recon4d.grounding.trajectories import ObjectTrack

JUMP_SIZES = 0.5  # a jump lifts the centre by at least this many object sizes (half that: unsure)
TURN_EVENT_DEG = 45.0  # one turn event swings the heading by at least this much
REVOLUTION_MARGIN = 0.15  # a revolution count within this many turns of the next whole number is unsure


def swings(signal: np.ndarray, threshold: float) -> list[tuple[float, int, int]]:
    """The alternating runs of ``signal`` that exceed ``threshold``: (signed extent, first frame, last frame).

    Hysteresis zig-zag: a run ends where the signal comes back by ``threshold``
    from its extreme, so jitter smaller than that never splits or starts one.
    """
    out, start, ext, sense = [], 0, 0, 0
    for i in range(1, len(signal)):
        if sense == 0:
            if abs(signal[i] - signal[start]) > abs(signal[ext] - signal[start]):
                ext = i
            if abs(signal[ext] - signal[start]) >= threshold:
                sense = 1 if signal[ext] > signal[start] else -1
            continue
        if (signal[i] - signal[ext]) * sense > 0:
            ext = i
        elif (signal[ext] - signal[i]) * sense >= threshold:
            out.append((float(signal[ext] - signal[start]), start, ext))
            start, sense = ext, -sense
            ext = i
    if sense != 0 and abs(signal[ext] - signal[start]) >= threshold:
        out.append((float(signal[ext] - signal[start]), start, ext))
    return out


def _lateral_track(t: ObjectTrack, viewmats: np.ndarray) -> np.ndarray:
    """Position along each frame's camera x, accumulated step by step (a panning camera does not add travel)."""
    steps = np.einsum("tij,tj->ti", viewmats[:-1, :3, :3], np.diff(t.centres, axis=0))
    return np.concatenate([[0.0], np.cumsum(steps[:, 0])])


def count_moves(t: ObjectTrack, label: str, viewmats: np.ndarray, up: np.ndarray) -> tuple[int | None, str]:
    """Separate movements ``label``-wards of at least an object size (the swings of the matching coordinate)."""
    eyes = camera_centres(viewmats)
    coordinate = {"left": -_lateral_track(t, viewmats), "right": _lateral_track(t, viewmats),
                  "up": t.centres @ up, "down": -(t.centres @ up),
                  "towards": -np.linalg.norm(t.centres - eyes, axis=1),
                  "away": np.linalg.norm(t.centres - eyes, axis=1)}[label]
    size = t.motion.size
    runs = [r for r, *_ in swings(coordinate, size)]
    near = [r for r, *_ in swings(coordinate, 0.5 * size) if abs(r) < size]
    if near:
        return None, f"movements of {[round(r, 2) for r in near]} are near the object size {size:.2f}"
    return sum(r > 0 for r in runs), f"movements {[round(r, 2) for r in runs]} (size {size:.2f})"


def count_steps(t: ObjectTrack, label: str, viewmats: np.ndarray, up: np.ndarray) -> tuple[int | None, str]:
    """Steps (somersaults, flips) taken ``label``-wards: only "none", or None.

    A gait's steps are not in the centre's path, so a count of them is not in the
    geometry; but an object that travels the other way and never moves ``label``-wards
    by its size (``count_moves``) took no step that way.
    """
    never, why = _never_towards(t, label, viewmats, up)
    return (0, why) if never else (None, f"steps are not in the centre's path; {why}")


def _never_towards(t: ObjectTrack, label: str, viewmats: np.ndarray, up: np.ndarray) -> tuple[bool, str]:
    """Whether the object travels the other way and never moves ``label``-wards by its size (``count_moves``)."""
    other, why = moves_towards(t, OPPOSITE[label])
    if not other:
        return False, why
    moves, moves_why = count_moves(t, label, viewmats, up)
    if moves != 0:
        return False, moves_why
    return True, f"travels {OPPOSITE[label]} ({why}), never {label}: {moves_why}"


def count_jumps(t: ObjectTrack, label: str | None, viewmats: np.ndarray, up: np.ndarray) -> tuple[int | None, str]:
    """Jumps (rises and falls of the centre by ``JUMP_SIZES`` object sizes), those travelling ``label`` if given.

    A jump to a side shifts the object that way by its size, so one that travels the other way and
    never moves ``label``-wards by its size made none, however unsure its rises are (DAVIS
    horsejump-high: a horse jumping to the right, asked how often it jumps to the left).
    The height is taken above the straight line from the clip's first height to its last: a jump
    rises above the line the object travels along and comes back to it, on a slope as on level
    ground, and an up a little off the world's (a ground plane fitted to a few points) tilts that
    line too (DAVIS horsejump-high: a steady climb of two sizes over the clip hid a jump of half a size).
    """
    if label in ("left", "right"):
        never, why = _never_towards(t, label, viewmats, up)
        if never:
            return 0, why
    height = t.centres @ up
    height = height - np.linspace(height[0], height[-1], len(height))
    size = t.motion.size
    if any(abs(r) < JUMP_SIZES * size for r, *_ in swings(height, 0.5 * JUMP_SIZES * size)):
        return None, f"a rise of {0.5 * JUMP_SIZES:.2f}-{JUMP_SIZES:.2f} sizes: maybe a jump"
    runs = swings(height, JUMP_SIZES * size)
    lateral = _lateral_track(t, viewmats)
    jumps = []
    for (rise, start, _), (fall, _, end) in pairwise(runs):
        if rise > 0 > fall:  # up then down: one jump
            shift = lateral[end] - lateral[start]
            jumps.append("right" if shift > size else "left" if shift < -size else "in place")
    if label in ("left", "right"):
        return jumps.count(label), f"jumps {jumps}"
    return len(jumps), f"jumps {jumps}"


def count_turns(t: ObjectTrack, label: str, up: np.ndarray) -> tuple[int | None, str]:
    """Turn events to ``label``: swings of the travel heading about up of ``TURN_EVENT_DEG`` or more."""
    if not t.motion.moving:
        return 0, "does not move"
    T = len(t.centres)
    w = max(2, T // 10)
    flat = t.centres - (t.centres @ up)[:, None] * up
    d = flat[w:] - flat[:-w]
    ref = d[np.argmax(np.linalg.norm(d, axis=1))]
    side = np.cross(up, ref)
    angle = np.unwrap(np.arctan2(d @ side, d @ ref))
    runs = [r for r, *_ in swings(np.degrees(angle), TURN_EVENT_DEG)]
    sense = 1.0 if label == "left" else -1.0
    return sum(r * sense > 0 for r in runs), f"heading swings {[round(r) for r in runs]} deg"


def count_revolutions(t: ObjectTrack, sense: str | None, axis: str, whole: bool = True) -> tuple[int | None, str]:
    """Revolutions of the body about up (spins) or the line of sight (flips), in ``sense`` if given: whole
    ones ("how many full revolutions"), or with ``whole`` false the times it spins, each spin of half a
    turn or more counted ("how many times does the dancer spin": a twirl of 0.8 turns is one).

    About up, the same turn ``rules.rotation`` reads, so that "is it spinning clockwise" and "how many
    times does it spin clockwise" agree: the turn seen across the outline of a body that stays in place
    in the image (``rules.clear_seen_spin``) where it reaches half a turn; for a travelling body whose
    path turns by ``SPIN_DEG`` or more (a spin by ``rotation``'s rule), that path's turn; else the
    fitted body's own rotation (DAVIS dance-twirl: a dancer twirling as she comes closer, her path
    turning 0.79 turns clockwise where the fitted body turns 0.04).
    """
    m = t.motion
    angle, source = (m.spin_deg if axis == "up" else m.roll_deg), "the fitted body's"
    seen = clear_seen_spin(t) if axis == "up" else None
    if seen is not None:
        angle, source = 360.0 * seen, "seen across its outline,"
    elif axis == "up" and m.moving and m.turn_known and abs(m.yaw_deg) >= SPIN_DEG:
        angle, source = m.yaw_deg, "its path's"
    turns = abs(angle) / 360.0
    way = "counter-clockwise" if angle > 0 else "clockwise"
    why = f"{source} {turns:.2f} turns {way}"
    if sense is not None and way != sense:
        return 0, why
    count = turns if whole else turns + 0.5  # whole turns, or the nearest number of spins
    if abs(count - round(count)) < REVOLUTION_MARGIN and round(count) >= 1:
        return None, f"{why}: near {'a whole number' if whole else 'a half'}"
    return int(count), why
