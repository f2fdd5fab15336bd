"""Geometric rules: one object's fitted motion -> a canonical answer, or None with the reason (the camera's
motion and two objects at once: ``recon4d.grounding.relations``).

Why rules apart from the parser and the choices: a rule reads only trajectories
(camera frame, world frame, the object's own heading frame, a time window cut by
the caller), so the same rule serves "what direction is X moving", "how many X
are moving to the left" and "at the start of the video"; and each rule says
"cannot tell" (None) when its margin is too small rather than guessing. Every
rule returns ``(label, why)``; per-object predicates for counts return
``(True | False | None, why)``.
"""

from __future__ import annotations

import math

import numpy as np

from recon4d.geometry import camera_centres
from recon4d.grounding.trajectories import (
    MOVING,
    NOT_ROTATING_DEG,
    ROTATING_DEG,
    ObjectTrack,
)

DOMINANCE = 1.5  # one axis must beat the others by this factor to name a direction
SHARE_YES, SHARE_NO = 0.5, 0.2  # share of the displacement along an axis: that way / not that way; between: unsure
SEEN_TURN_SHARE = 0.2  # change of the heading's lateral component a turn needs to be to a side as seen
EDGE_ON = 0.1  # a rotation about up foreshortened below this share of itself is seen edge-on
NO_SPIN_DEG, SPIN_DEG = 90.0, 180.0  # a travelling object's path turn: under a quarter turn no spin; a half: a spin
SEEN_SCALE = 0.1  # apparent size change (linear) that says the object came closer / went away; less: unsure
# Under the offline depth, a body whose net travel in the image stays under this many of its sizes may be
# spinning where it stands, and its outline's spin is read (``seen_spin_turns``; with a trusted depth, under
# ``MOVING``, one size, and the depth's travel tells an arc from a spin). Why more than one size: a breakdancer's
# fitted centre ends 1.0 or 1.4 sizes from its start, depending on the fit, while she spins 2 turns in place;
# on the 24 DAVIS fits no other object under two sizes has an outline drift of half a turn (the bus, 4.2 sizes,
# drifts 3.6 turns).
IN_PLACE = 2.0
# Under the offline depth, a camera that stays put sees a straight path when the centre's image path keeps to
# this share of its length as net travel and turns by less than ``SEEN_BEND_DEG`` (``seen_straight``).
SEEN_STRAIGHT, SEEN_BEND_DEG = 0.95, 10.0
OPPOSITE = {"left": "right", "right": "left", "up": "down", "down": "up", "towards": "away", "away": "towards",
            "above": "down", "below": "up"}
_TURN_UNKNOWN = "a half of its path travels under half its size: the path's turn is not measurable"
CAME_FROM = {"left": "right", "right": "left", "down": "above", "up": "below", "towards": "away", "away": "towards"}


def _unchanged_size(scale: float) -> bool:
    """Whether an apparent size ratio (end over start, ``seen_scale``) changes by less than ``SEEN_SCALE``."""
    return abs(math.log(scale)) < math.log1p(SEEN_SCALE)


def direction(t: ObjectTrack, offered: set[str], viewmats: np.ndarray | None = None) -> tuple[str | None, str]:
    """Dominant camera-frame direction among the offered axes, or None when no axis dominates.

    Only the axes the choices offer compete: the choices say which axes the answer lies on, and
    an axis they leave out (the fitted travel in depth, when only left and right are offered)
    must not block a lateral answer that the image shows directly. The winner must still be at
    least ``SHARE_NO`` of the net travel, so that a motion along an axis not offered is no answer.

    ``t.depth_evidence`` false (the offline sparse depth, which gives a moving object the depth of
    the static surface around it): the travel in depth is no evidence, so it neither competes nor
    counts in the net travel, and the answer is the image plane's; an object that travels in the
    image by less than its size is then not known to stay in place (it may be coming closer), unless
    its apparent size (``seen_scale``, with the cameras ``viewmats``) stays within ``SEEN_SCALE``: an
    object that neither crosses the image nor grows or shrinks in it stays where it is; or, where no
    apparent size is known, unless it is seen to spin there (``clear_seen_spin``), as ``still`` takes it. The
    seen spin also holds in place a body that travels in the image by one to ``IN_PLACE`` sizes (a spinning
    dancer's fitted centre wanders that far), unless its apparent size changes by ``SEEN_SCALE`` or more.
    """
    m, depth_evidence = t.motion, t.depth_evidence
    if not m.moving:
        return "not moving", f"reach {m.reach:.2f} <= object size {m.size:.2f}"
    axes = {"lateral": (m.lateral, "right", "left"), "depth": (m.depth, "away", "towards"), "rise": (m.rise, "up", "down")}
    if not depth_evidence:
        depth = axes.pop("depth")[0]
    net = float(np.linalg.norm([v for v, *_ in axes.values()]))
    if net < MOVING * m.size:  # moved about but ended where it began (a dancer staying in place)
        if not depth_evidence and abs(depth) >= MOVING * m.size:
            why = f"net travel {net:.2f} in the image plane, within the object's size {m.size:.2f}"
            scale = None if viewmats is None else seen_scale(t, viewmats)
            if scale is not None and _unchanged_size(scale):
                return "not moving", f"{why}, and it looks {scale:.2f}x as big at the end"
            seen = clear_seen_spin(t) if scale is None else None
            if seen is not None:  # as ``still`` takes it, where no apparent size says otherwise
                return "not moving", f"{why}, and it is seen to spin there ({seen:+.2f} turns)"
            return None, f"{why}; its travel in depth ({depth:+.2f}) is the offline depth's, no evidence"
        return "not moving", f"net travel {net:.2f} within the object's size {m.size:.2f}"
    seen = None if depth_evidence else clear_seen_spin(t)
    if seen is not None:  # a little image travel, spinning where it stands (as ``still`` takes it)
        scale = None if viewmats is None else seen_scale(t, viewmats)
        if scale is None or _unchanged_size(scale):
            return "not moving", (f"net travel {net:.2f} in the image plane, under {IN_PLACE:.0f} of its sizes, and "
                                  f"it is seen to spin there ({seen:+.2f} turns)")
    asked = [n for n, (_, pos, neg) in axes.items() if pos in offered or neg in offered]
    best = max(asked, key=lambda n: abs(axes[n][0]), default=None)
    if best is None:
        return None, "no direction among the choices"
    others = max((abs(axes[n][0]) for n in asked if n != best), default=0.0)
    if abs(axes[best][0]) < DOMINANCE * others:
        return None, f"{best} {axes[best][0]:+.2f} does not dominate (next {others:.2f})"
    if abs(axes[best][0]) < SHARE_NO * net:
        return None, f"{best} {axes[best][0]:+.2f} is under {SHARE_NO:.0%} of the travel {net:.2f}"
    v, pos, neg = axes[best]
    return (pos if v > 0 else neg), f"{best} {v:+.2f}, others at most {others:.2f}"


def origin(t: ObjectTrack, offered: set[str], viewmats: np.ndarray | None = None) -> tuple[str | None, str]:
    """Where the object came from: the side opposite its direction of travel ("came from the left": moves right)."""
    label, why = direction(t, {OPPOSITE[o] for o in offered if o in OPPOSITE}, viewmats)
    if label == "not moving" or label is None:
        return label, why
    return CAME_FROM[label], f"moves {label}; {why}"


def _share(value: float, t: ObjectTrack) -> float:
    """``value`` as a share of the object's net camera-frame displacement."""
    m = t.motion
    return value / max(float(np.linalg.norm([m.lateral, m.depth, m.rise])), 1e-9)


def _along_path(t: ObjectTrack, name: str, share: float, positive: str, negative: str, still: str
                ) -> tuple[str | None, str]:
    """The sign of the motion's component ``name`` (an attribute of ``t.motion``); None when it is under ``share``
    of the path length, "not moving" (because ``still``) when the object does not move."""
    m = t.motion
    if not m.moving:
        return "not moving", still
    value = getattr(m, name)
    why = f"{name} {value:+.2f} of path {m.path:.2f}"
    if abs(value) < share * m.path:
        return None, why
    return (positive if value > 0 else negative), why


def distance(t: ObjectTrack, viewmats: np.ndarray) -> tuple[str | None, str]:
    """Towards / away from the camera: the object's own change of distance to the camera.

    Where id masks show the object, its apparent size decides (``seen_scale``):
    it needs no depth, and the fit's depth can be wrong in its change (see
    ``recon4d.grounding.seen``). A change under ``SEEN_SCALE``, or no masks, leaves
    it to the fitted path's radial travel; under the offline sparse depth
    (``t.depth_evidence`` false) that travel is the surface's around the object, no
    evidence, as in ``direction``: only an object that neither crosses the image
    nor changes its apparent size is known to stay where it is.
    """
    way, scale = seen_approach(t, viewmats)
    if way is not None:
        return way, f"looks {scale:.2f}x as big at the end as at the start"
    why = "" if scale is None else f"looks {scale:.2f}x as big at the end; "
    if not t.depth_evidence:
        label, still_why = direction(t, {"towards", "away"}, viewmats)
        return label, why + (still_why if label is not None else "its fitted radial travel is the offline depth's")
    label, path_why = _along_path(t, "radial", 0.3, "away", "towards", still=f"path {t.motion.path:.2f}")
    return label, why + path_why


def seen_approach(t: ObjectTrack, viewmats: np.ndarray) -> tuple[str | None, float | None]:
    """"towards" / "away" where the apparent size changes by ``SEEN_SCALE`` or more (else None), and the scale."""
    scale = seen_scale(t, viewmats)
    if scale is None or _unchanged_size(scale):
        return None, scale
    return ("towards" if scale > 1 else "away"), scale


def seen_scale(t: ObjectTrack, viewmats: np.ndarray) -> float | None:
    """How many times bigger the object looks in the clip's last third than in its first, the camera's own
    approach taken out; None without masks, or where the thirds' frames cannot say.

    Medians over each third, so that a few frames of a walking animal's changing outline
    do not decide. The camera's part: the factor by which the camera's travel alone
    changes its distance to where the object was at the start (fitted cameras and
    position; on a still camera it is exactly 1).
    Where one third has fewer than two whole frames, the size of its visible part bounds
    its size from below: a subject that comes closer until the frame cuts it (DAVIS
    dance-twirl: whole for 35 of 70 frames) still looks bigger at the end, and one that
    walks away out of a cut start still looks smaller. A bound that does not clear
    ``SEEN_SCALE`` says nothing (None).
    """
    if t.seen_size is None:
        return None
    T = len(t.seen_size)
    third = max(1, T // 3)
    frames = np.arange(T)
    first = frames[:third][np.isfinite(t.seen_size[:third])]
    last = frames[T - third:][np.isfinite(t.seen_size[T - third:])]
    if len(first) >= 2 and len(last) >= 2:
        return _size_ratio(t, viewmats, t.seen_size, first, t.seen_size, last)
    visible = np.zeros(T) if t.visible_size is None else t.visible_size
    if len(first) >= 2:  # the end is cut: its visible part says "at least this big"
        cut = frames[T - third:][visible[T - third:] > 0]
        ratio = None if len(cut) < 2 else _size_ratio(t, viewmats, t.seen_size, first, visible, cut)
        return ratio if ratio is not None and ratio >= 1 + SEEN_SCALE else None
    if len(last) >= 2:  # the start is cut: at least as big then as its visible part
        cut = frames[:third][visible[:third] > 0]
        ratio = None if len(cut) < 2 else _size_ratio(t, viewmats, visible, cut, t.seen_size, last)
        return ratio if ratio is not None and ratio <= 1 / (1 + SEEN_SCALE) else None
    return None


def _size_ratio(t: ObjectTrack, viewmats: np.ndarray, sizes_a: np.ndarray, first: np.ndarray,
                sizes_b: np.ndarray, last: np.ndarray) -> float:
    """Median size over frames ``last`` over that over ``first``, the camera's own approach taken out."""
    looks = float(np.median(sizes_b[last]) / np.median(sizes_a[first]))
    a, b = int(np.median(first)), int(np.median(last))
    eyes = camera_centres(viewmats[[a, b]])
    start = t.centres[a]
    camera = np.linalg.norm(start - eyes[0]) / max(float(np.linalg.norm(start - eyes[1])), 1e-9)
    return looks / camera


def vertical(t: ObjectTrack, viewmats: np.ndarray | None = None) -> tuple[str | None, str]:
    """Up / down (uphill, landing, taking off): ``direction`` with only the up axis offered.

    Why not a share of the path: the rise must then be a share of the same net travel that
    "which direction" weighs it against, so that a walker going downhill across the image is
    "down" by the rule that would call it "right" (bear: rise 26% of the net image travel, 9%
    of a path that the legs' wobble lengthens); under the offline depth, the image plane's.
    """
    return direction(t, {"up", "down"}, viewmats)


def rotation(t: ObjectTrack, viewmats: np.ndarray, spin: bool = False) -> tuple[str | None, str]:
    """Clockwise / counter-clockwise as seen: body spin for a still object, the path's turn for a moving one.

    ``spin`` ("is the bear spinning"): a travelling object spins only if its path
    turns by ``SPIN_DEG`` or more; under ``NO_SPIN_DEG`` it does not spin, it turns;
    above that, an outline seen to turn by less than ``NO_SPIN_DEG`` says it does not spin,
    however far the fitted path turns (a walker's wobble under a travelling camera's solve
    turns its path by a full turn: DAVIS bear, docs/decisions.md session 39).
    Why not the 12-20 degree band of any rotation: on real clips the path turn of
    a walking animal or a bus that goes straight reads 20-60 degrees (measured in
    docs/decisions.md), so that band calls half the travelling subjects spinning.
    A camera that sees the turn edge-on (the foreshortened rotation under
    ``EDGE_ON`` of the turn: a camera within ~6 degrees of level, as in most
    hand-held clips) shows no sense; the sense is then the one seen from above,
    the way a viewer describes a car going round a roundabout.
    Before all that: a body that stays in place in the image and is seen to turn
    by ``SPIN_DEG`` or more across its outline (``clear_seen_spin``) rotates that
    way, even where the fit has it wobbling about (a dancer whose outline grows
    and shrinks; a spinning cube found by its motion masks, whose centre wanders
    with the moving edges) and its path's turn is noise. Under the offline depth, a traveller that a
    camera staying put sees going straight (``seen_straight``) does not rotate, whatever its fitted path.
    """
    m = t.motion
    seen = clear_seen_spin(t)
    if seen is not None:
        return ("counter-clockwise" if seen > 0 else "clockwise"), f"stays in place and is seen to turn {seen:+.2f} turns"
    straight = seen_straight(t, viewmats)
    if straight is not None:
        return "not rotating", straight
    if m.moving and not m.turn_known:
        return None, _TURN_UNKNOWN
    turn = abs(m.yaw_deg)
    if spin and m.moving:
        if turn < NO_SPIN_DEG:
            return "not rotating", f"travels and turns {m.yaw_deg:+.1f} deg: less than a spin"
        outline = seen_spin_turns(t, travelling=True)
        if outline is not None and abs(outline) < NO_SPIN_DEG / 360.0:
            return "not rotating", (f"travels and turns {m.yaw_deg:+.1f} deg, but is seen to turn only {outline:+.2f} "
                                    "turns across its outline: no spin")
        if turn < SPIN_DEG:
            return None, f"travels and turns {m.yaw_deg:+.1f} deg: maybe a spin, maybe a turn"
    if turn < NOT_ROTATING_DEG:
        return "not rotating", f"yaw {m.yaw_deg:+.1f} deg"
    if turn < ROTATING_DEG:
        return None, f"yaw {m.yaw_deg:+.1f} deg: in the uncertain band"
    if abs(m.seen_rotation_deg) < EDGE_ON * turn:
        if not m.about_up:
            return None, f"yaw {m.yaw_deg:+.1f} deg, seen {m.seen_rotation_deg:+.1f} deg: in the uncertain band"
        return (("counter-clockwise" if m.yaw_deg > 0 else "clockwise"),
                f"yaw {m.yaw_deg:+.1f} deg seen edge-on ({m.seen_rotation_deg:+.1f} deg): the sense from above")
    return ("counter-clockwise" if m.seen_rotation_deg > 0 else "clockwise"), f"seen rotation {m.seen_rotation_deg:+.1f} deg"


def seen_spin_turns(t: ObjectTrack, travelling: bool = False) -> float | None:
    """Turns (+ = counter-clockwise from above) the image shows across the object's outline
    (``seen.seen_spin``), for an object whose net travel in the image plane stays within its size (``IN_PLACE``
    sizes under the offline depth); None for one that travels (its legs and changing outline drift the
    reading up to a turn or more) or where the masks do not show it (in under half the frame pairs; the others' mean rate stands in for the rest).
    ``travelling``: for any object, as evidence against a spin only (a drift adds turns; a real spin cannot
    read as none)."""
    m = t.motion
    in_place = MOVING if t.depth_evidence else IN_PLACE
    if t.seen_spin is None or not travelling and m.image_net >= in_place * m.size:
        return None
    shown = np.isfinite(t.seen_spin)
    if shown.sum() < 0.5 * len(t.seen_spin):
        return None
    return float(np.nanmean(t.seen_spin) * len(t.seen_spin) / (2 * math.pi))


def clear_seen_spin(t: ObjectTrack) -> float | None:
    """The turns of a body that stays in place in the image where its outline shows a spin: ``SPIN_DEG`` or
    more (``seen_spin_turns``); None otherwise. What ``rotation``, ``spinning``, ``count_revolutions`` and the
    cues read, so that all four decide alike."""
    turns = seen_spin_turns(t)
    return turns if turns is not None and abs(turns) >= SPIN_DEG / 360.0 else None


def own_direction(t: ObjectTrack) -> tuple[str | None, str]:
    """Forwards / backwards from the object's own perspective: forwards whenever it moves.

    Why not the travel along the fitted body's heading: the front of a body is not in the geometry
    (no classes, no faces), so its heading is its travel at the start carried along by the fitted
    rotation, and "backwards" would only mean that rotation turned it round. On real clips that
    rotation is what the fit gets wrong (the path turns under the offline depth: docs/decisions.md);
    DAVIS dog, coming closer, read -0.29 of its path 0.50 "backwards". So a moving object faces the
    way it travels, as ``facing`` takes it. Wrong for a car reversing or a person walking backwards.
    A body seen to spin where it stands (``clear_seen_spin``) does not travel, as ``still`` takes it.
    """
    m = t.motion
    if not m.moving:
        return "not moving", f"path {m.path:.2f}"
    seen = clear_seen_spin(t)
    if seen is not None:
        return "not moving", f"stays in place and is seen to turn {seen:+.2f} turns"
    return "forwards", f"moves (reach {m.reach:.2f} > size {m.size:.2f}); its front is taken to be the way it travels"


def own_turn(t: ObjectTrack, viewmats: np.ndarray) -> tuple[str | None, str]:
    """Left / right from the object's own perspective: the sense of its path's turn about up."""
    m = t.motion
    settled = _no_turn_to_read(t, viewmats)
    if settled is not None:
        return settled
    if abs(m.yaw_deg) < ROTATING_DEG:
        return None, f"yaw {m.yaw_deg:+.1f} deg: in the uncertain band"
    return ("left" if m.yaw_deg > 0 else "right"), f"yaw {m.yaw_deg:+.1f} deg"


def _no_turn_to_read(t: ObjectTrack, viewmats: np.ndarray) -> tuple[str | None, str] | None:
    """The answer of a turn question that needs no turn's sense (not moving, straight as seen, unmeasurable,
    straight), else None."""
    m = t.motion
    if not m.moving:
        return "not moving", "does not move, so it has no heading to turn"
    straight = seen_straight(t, viewmats)
    if straight is not None:
        return "straight", straight
    if not m.turn_known:
        return None, _TURN_UNKNOWN
    if abs(m.yaw_deg) < NOT_ROTATING_DEG:
        return "straight", f"yaw {m.yaw_deg:+.1f} deg"
    return None


def seen_straight(t: ObjectTrack, viewmats: np.ndarray) -> str | None:
    """Under the offline depth, why a travelling object goes straight: a camera that stays put sees its centre
    travel along a straight line (``SEEN_STRAIGHT``, ``SEEN_BEND_DEG``) at an unchanged apparent size
    (``seen_scale``); None otherwise, and always with a trusted depth.

    Why: the fitted path's turn is then the offline depth's, no evidence (a ball rolling straight across
    the view read as turning 28 to 157 degrees), while the image shows the turn directly. A path on the
    ground is a straight line in such a camera's view exactly when it is straight (the ground maps to the
    image by a homography); a turn seen edge-on, by a camera at the height of the path, keeps the image
    path straight but swings the object towards or away from the camera, and so changes its apparent size.
    Why no answer without an apparent size: a straight image path alone is also what that edge-on turn shows.
    """
    m = t.motion
    if t.depth_evidence or not m.moving or m.seen_straightness is None:
        return None
    if m.seen_straightness < SEEN_STRAIGHT or m.seen_path_turn_deg >= SEEN_BEND_DEG:
        return None
    scale = seen_scale(t, viewmats)
    if scale is None or not _unchanged_size(scale):
        return None
    return (f"a camera that stays put sees it go straight (turn {m.seen_path_turn_deg:.1f} deg, net "
            f"{m.seen_straightness:.2f} of its image path) and keep its apparent size ({scale:.2f}x)")


def _travel(points: np.ndarray) -> np.ndarray:
    """Least-squares travel direction over a run of positions (not just its two ends)."""
    frame = np.arange(len(points)) - (len(points) - 1) / 2
    return frame @ points


def seen_turn(t: ObjectTrack, viewmats: np.ndarray, up: np.ndarray) -> tuple[str | None, str]:
    """Left / right from the camera's perspective: the side the travel direction swings to in the camera's view.

    Why not the own turn: an object coming towards the camera that turns to its own
    left swerves to the camera's right. The swing is the change of the lateral
    (camera x) component of the unit horizontal travel direction between the
    path's two halves, each half seen by the camera at its middle frame.
    """
    m = t.motion
    settled = _no_turn_to_read(t, viewmats)
    if settled is not None:
        return settled
    half = len(t.centres) // 2
    lateral = []
    for lo, hi in ((0, half + 1), (half, len(t.centres))):
        d = _travel(t.centres[lo:hi])
        d = d - (d @ up) * up
        d /= max(np.linalg.norm(d), 1e-9)
        lateral.append(float(viewmats[(lo + hi) // 2, 0, :3] @ d))
    swing = lateral[1] - lateral[0]
    if abs(swing) < SEEN_TURN_SHARE:
        return None, f"yaw {m.yaw_deg:+.1f} deg but the heading's lateral part changes by {swing:+.2f}"
    return ("right" if swing > 0 else "left"), f"heading's lateral part {lateral[0]:+.2f} -> {lateral[1]:+.2f}"


def facing(t: ObjectTrack, offered: set[str], viewmats: np.ndarray | None = None) -> tuple[str | None, str]:
    """Which way an object faces: the way it travels (a still object's front is not in the geometry)."""
    if not t.motion.moving:
        return None, "does not move: its front is not observable"
    return direction(t, offered, viewmats)


# Per-object predicates, for counts ---------------------------------------------------------------


def moves_towards(t: ObjectTrack, label: str) -> tuple[bool | None, str]:
    """Does the object travel ``label`` (left/right/up/down in the camera's view; towards/away: its distance)?

    A body seen to spin where it stands (``clear_seen_spin``) does not travel, as ``still`` takes it.
    ``t.depth_evidence`` false (the offline sparse depth): a side or up/down is a share of the travel in the
    image plane, as in ``direction``, the fitted travel in depth being the surface's around the object.
    """
    m = t.motion
    if not m.moving:
        return False, "not moving"
    if clear_seen_spin(t) is not None:
        return False, "stays in place, seen to spin"
    value = {"left": -m.lateral, "right": m.lateral, "up": m.rise, "down": -m.rise,
             "towards": -m.radial, "away": m.radial}[label]
    if label in ("towards", "away"):
        share = value / max(m.path, 1e-9)
    elif t.depth_evidence:
        share = _share(value, t)
    else:
        share = value / max(m.image_net, 1e-9)
    if share >= SHARE_YES:
        return True, f"{label} share {share:+.2f}"
    if share <= SHARE_NO:
        return False, f"{label} share {share:+.2f}"
    return None, f"{label} share {share:+.2f}: in the uncertain band"


def labelled(rule, label: str):
    """A predicate "the rule says ``label``" from a rule returning a label (None stays unsure)."""
    def predicate(t: ObjectTrack) -> tuple[bool | None, str]:
        got, why = rule(t)
        return (None if got is None else got == label), why
    return predicate


def still(t: ObjectTrack) -> tuple[bool | None, str]:
    """Stays in the same place: its centre never gets further than its size from where it was; or, as
    ``spinning`` and ``rotation`` take it, it stays in place in the image and is seen to spin there (a
    spinner's motion-mask centre wanders with its moving edges)."""
    m = t.motion
    seen = clear_seen_spin(t)
    if seen is not None:
        return True, f"stays in place and is seen to turn {seen:+.2f} turns"
    if 0.8 * MOVING * m.size < m.reach < 1.25 * MOVING * m.size:
        return None, f"reach {m.reach:.2f} near the object size {m.size:.2f}"
    return not m.moving, f"reach {m.reach:.2f}, size {m.size:.2f}"


def spinning(t: ObjectTrack, viewmats: np.ndarray) -> tuple[bool | None, str]:
    """Spinning in place: still (or staying in place in the image and seen to turn there), and rotating about up."""
    seen = clear_seen_spin(t)
    if seen is not None:
        return True, f"stays in place and is seen to turn {seen:+.2f} turns"
    label, why = rotation(t, viewmats)
    if label is None:
        return None, why
    return (not t.motion.moving and label != "not rotating"), why
