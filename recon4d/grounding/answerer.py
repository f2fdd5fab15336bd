"""Geometric answers to VLM4D-style questions, read off the fitted trajectories (no VLM, no ground truth).

Why: it is the upper bound of what explicit 4D grounding can give, and a check on
the reconstruction: if the fit moved an object the wrong way, the answer is wrong.
A question is parsed into a kind and its subject(s) by a handful of patterns (the
VLM4D wordings); the subject is bound to a fitted object; the kind's rule turns
the motion measures into a canonical answer (a direction word or a count); and
that answer is matched to one of the choices through a small synonym table.
Whatever cannot be parsed, bound or decided with margin is answered
"cannot tell", with the reason, rather than guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from recon4d.grounding.objects import HUES
from recon4d.grounding.shape import SHAPES
from recon4d.grounding.trajectories import NOT_ROTATING_DEG, ROTATING_DEG, ObjectTrack, SceneTracks, heading_offset_deg

CANNOT_TELL = "cannot tell"
DOMINANCE = 1.5  # one axis must beat the others by this factor to name a direction
SAME_DIRECTION_DEG, HEADING_DEG = 10.0, 20.0  # relative heading: same below, left/right above
COLOUR_WORDS = set(HUES) | {"white", "grey", "gray", "black"}
# Shape nouns the answerer knows: the shapes it can estimate (and synonyms), and shapes it never
# estimates, which therefore no object with a known shape has.
SHAPE_NOUNS = {**{s: s for s in (*SHAPES, "cone", "pyramid", "ring")}, "sphere": "ball"}
# canonical answer -> texts a choice may use for it
SYNONYMS = {
    "left": {"left", "to the left", "turning left"},
    "right": {"right", "to the right", "turning right"},
    "towards": {"towards the camera", "toward the camera", "towards", "toward", "coming closer", "closer"},
    "away": {"away from the camera", "away", "going further away", "moving further away", "further away"},
    "up": {"up", "upwards", "uphill"},
    "down": {"down", "downwards", "downhill"},
    "not moving": {"not moving", "stationary", "still"},
    "clockwise": {"clockwise"},
    "counter-clockwise": {"counter-clockwise", "counterclockwise", "anticlockwise", "anti-clockwise"},
    "not rotating": {"not rotating", "not spinning"},
    "forwards": {"forwards", "forward"},
    "backwards": {"backwards", "backward"},
    "straight": {"moving straight and not turning", "straight", "not turning"},
    "same direction": {"same direction"},
}
PATTERNS = [  # (kind, regex); subjects are the named groups a and b
    ("relative_heading", r"relative to the direction the (?P<a>.+?) is moving, is the (?P<b>.+?) heading to its left or"),
    ("count_shape", r"^how many (?P<a>[a-z ]+?)s are there in the video"),
    ("count_side", r"^how many objects are moving to the (?P<side>left|right)"),
    ("count_still", r"^how many objects stay in the same place"),
    ("count_spinning", r"^how many objects are spinning in place"),
    ("rotation", r"(?:is|are) the (?P<a>.+?) (?:rotating|spinning|turning) clockwise or counter-?clockwise"),
    ("own_turn", r"(?:is|are) the (?P<a>.+?) turning (?:to the )?left or (?:to the )?right"),
    ("own_direction", r"(?:is|are) the (?P<a>.+?) \w+ forwards? or backwards?"),
    ("distance", r"(?:is|are) the (?P<a>.+?) (?:coming|moving|getting) closer or (?:moving|going|getting) \w+ away"),
    ("direction", r"(?:what|which) (?:direction|way) (?:is|are|did|does) the (?P<a>.+?) (?:\w+ing|move|go)\b"),
]


@dataclass
class Answer:
    """One answered question: the chosen choice (or "cannot tell"), why, and the numbers used."""

    kind: str
    answer: str | int
    letter: str | None
    why: str
    subject: str | None = None
    bound_to: str | None = None
    numbers: dict = field(default_factory=dict)


def parse(question: str) -> tuple[str, dict]:
    """Kind and captured parts (subjects, side) of a question; kind "unsupported" when no pattern fits."""
    text = question.lower().strip()
    for kind, pattern in PATTERNS:
        m = re.search(pattern, text)
        if m:
            return kind, {k: v.strip() for k, v in m.groupdict().items()}
    return "unsupported", {}


def bind(name: str, st: SceneTracks) -> tuple[ObjectTrack | None, str]:
    """The fitted object a noun phrase names, or None (absent or unknown) with the reason.

    Phrases with a colour word or a known shape noun ("the red ball", "the cone")
    are matched on what they name: an object of another colour or of another
    known shape does not match. One match binds; none is absent; but an object of
    the named colour whose shape is unknown might be the one named, so while there
    is one the phrase is neither bound nor absent. A bare noun ("the swan") binds
    to the only moving object when there is exactly one, and to nothing otherwise.
    """
    words = name.replace("-", " ").split()
    colour = next((w.replace("gray", "grey") for w in words if w in COLOUR_WORDS), None)
    shape = next((SHAPE_NOUNS[w] for w in words if w in SHAPE_NOUNS), None)
    if colour is None and shape is None:
        if len(st.tracks) == 1:
            return st.tracks[0], f"assumed: '{name}' is the only moving object ({st.tracks[0].obj.label})"
        return None, f"unbound: '{name}' names no colour or shape and {len(st.tracks)} objects move"
    looks = " ".join(w for w in (colour, shape) if w)
    hits = [t for t in st.tracks if colour in (None, t.obj.colour) and shape in (None, t.obj.shape)]
    unsure = [t for t in st.tracks if colour in (None, t.obj.colour) and shape is not None and t.obj.shape is None]
    if len(hits) == 1 and not unsure:
        how = " and ".join(w for w, named in (("colour", colour), ("shape", shape)) if named)
        return hits[0], f"matched {hits[0].obj.label} (object {hits[0].obj.index}) by {how}"
    if not hits and not unsure:
        return None, f"absent: no fitted object is {'a ' + looks if shape else looks}"
    if unsure:
        return None, "unsure: shape unknown for " + "; ".join(f"{t.obj.label} ({t.obj.shape_note})" for t in unsure)
    return None, f"ambiguous: {len(hits)} objects match '{looks}'"


def _direction(t: ObjectTrack, offered: set[str]) -> tuple[str | None, str]:
    """Dominant camera-frame direction among the offered axes, or None when no axis dominates."""
    m = t.motion
    if not m.moving:
        return "not moving", f"reach {m.reach:.2f} <= object size {m.size:.2f}"
    axes = {"lateral": (m.lateral, "right", "left"), "depth": (m.depth, "away", "towards"), "rise": (m.rise, "up", "down")}
    mags = sorted(((abs(v), name) for name, (v, *_) in axes.items()), reverse=True)
    asked = [n for n, (_, pos, neg) in axes.items() if pos in offered or neg in offered]
    best = max(asked, key=lambda n: abs(axes[n][0]), default=None)
    if best is None:
        return None, "no direction among the choices"
    others = max((mag for mag, n in mags if n != best), default=0.0)
    if abs(axes[best][0]) < DOMINANCE * others:
        return None, f"{best} {axes[best][0]:+.2f} does not dominate (next {others:.2f})"
    v, pos, neg = axes[best]
    return (pos if v > 0 else neg), f"{best} {v:+.2f}, others at most {others:.2f}"


def _rotation(t: ObjectTrack) -> tuple[str | None, str]:
    m = t.motion
    if abs(m.yaw_deg) < NOT_ROTATING_DEG:
        return "not rotating", f"yaw {m.yaw_deg:+.1f} deg"
    if abs(m.yaw_deg) < ROTATING_DEG or abs(m.seen_rotation_deg) < 0.1 * abs(m.yaw_deg):
        return None, f"yaw {m.yaw_deg:+.1f} deg, seen {m.seen_rotation_deg:+.1f} deg: in the uncertain band"
    return ("counter-clockwise" if m.seen_rotation_deg > 0 else "clockwise"), f"seen rotation {m.seen_rotation_deg:+.1f} deg"


def _own_direction(t: ObjectTrack) -> tuple[str | None, str]:
    m = t.motion
    if not m.moving:
        return "not moving", f"path {m.path:.2f}"
    if abs(m.forward) < 0.5 * m.path:
        return None, f"forward {m.forward:+.2f} of path {m.path:.2f}"
    return ("forwards" if m.forward > 0 else "backwards"), f"forward {m.forward:+.2f} of path {m.path:.2f}"


def _own_turn(t: ObjectTrack) -> tuple[str | None, str]:
    m = t.motion
    if not m.moving:
        return None, "does not move, so it has no heading to turn"
    if abs(m.yaw_deg) < NOT_ROTATING_DEG:
        return "straight", f"yaw {m.yaw_deg:+.1f} deg"
    if abs(m.yaw_deg) < ROTATING_DEG:
        return None, f"yaw {m.yaw_deg:+.1f} deg: in the uncertain band"
    return ("left" if m.yaw_deg > 0 else "right"), f"yaw {m.yaw_deg:+.1f} deg"


def _distance(t: ObjectTrack) -> tuple[str | None, str]:
    m = t.motion
    if not m.moving:
        return "not moving", f"path {m.path:.2f}"
    if abs(m.radial) < 0.3 * m.path:
        return None, f"radial {m.radial:+.2f} of path {m.path:.2f}"
    return ("away" if m.radial > 0 else "towards"), f"radial {m.radial:+.2f} of path {m.path:.2f}"


def _count(kind: str, parts: dict, st: SceneTracks) -> tuple[int | None, str]:
    if kind == "count_shape":
        return _count_shape(parts["a"], st)
    if kind == "count_side":
        dirs = [_direction(t, {"left", "right", "towards", "away"})[0] for t in st.tracks]
        if None in dirs:
            return None, "some object's direction is ambiguous"
        return dirs.count(parts["side"]), f"directions {dirs}"
    if kind == "count_still":
        return sum(not t.motion.moving for t in st.tracks), f"paths {[round(t.motion.path, 2) for t in st.tracks]}"
    rot = [_rotation(t)[0] for t in st.tracks if not t.motion.moving]
    if None in rot:
        return None, "some still object's rotation is ambiguous"
    return sum(r != "not rotating" for r in rot), f"rotation of still objects {rot}"


def _count_shape(noun: str, st: SceneTracks) -> tuple[int | None, str]:
    """How many objects have the shape (and colour, if named) of ``noun``; None unless every shape is known."""
    words = noun.split()
    shape = SHAPE_NOUNS.get(words[-1])
    colour = next((w.replace("gray", "grey") for w in words if w in COLOUR_WORDS), None)
    if shape is None:
        return None, f"'{noun}' is not a shape the geometry knows"
    unknown = [t.obj.label for t in st.tracks if t.obj.shape is None]
    if unknown:
        return None, f"shape unknown for {', '.join(unknown)}"
    shapes = [t.obj.looks for t in st.tracks]
    return sum(t.obj.shape == shape and colour in (None, t.obj.colour) for t in st.tracks), f"shapes {shapes}"


def _choose(label: str | int, choices: dict) -> str | None:
    """Letter of the choice that says ``label`` (a canonical word, "absent" or a count)."""
    for letter, text in choices.items():
        if isinstance(label, int):
            if str(text).strip() == str(label):
                return letter
            continue
        t = str(text).lower().strip().rstrip(".")
        if label == "absent" and (t.startswith("no ") or "there are no" in t or "there is no" in t):
            return letter
        if t in SYNONYMS.get(str(label), {label}):
            return letter
    return None


def answer_question(entry: dict, st: SceneTracks) -> Answer:
    """Answer one VLM4D entry (question + choices) from the scene's trajectories."""
    kind, parts = parse(entry["question"])
    choices = entry["choices"]
    if kind == "unsupported":
        return Answer(kind, CANNOT_TELL, None, "question type not supported by the geometric answerer")
    if kind.startswith("count"):
        n, why = _count(kind, parts, st)
        return _finish(Answer(kind, CANNOT_TELL, None, why), n, choices)
    subject = parts["b"] if kind == "relative_heading" else parts["a"]
    track, bound = bind(subject, st)
    ans = Answer(kind, CANNOT_TELL, None, bound, subject=subject)
    if track is None:
        return _finish(ans, "absent" if bound.startswith("absent") else None, choices)
    ans.bound_to = track.obj.label
    m = track.motion
    ans.numbers = {k: round(float(getattr(m, k)), 3) for k in
                   ("size", "path", "reach", "lateral", "depth", "rise", "radial", "forward", "yaw_deg", "seen_rotation_deg")}
    if kind == "relative_heading":
        leader, how = bind(parts["a"], st)
        if leader is None or not (leader.motion.moving and m.moving):
            ans.why += f"; leader: {how}; both must move"
            return ans
        offset = heading_offset_deg(leader, track, st.up)
        ans.numbers["heading_offset_deg"] = round(offset, 1)
        label = ("same direction" if abs(offset) < SAME_DIRECTION_DEG else
                 None if abs(offset) < HEADING_DEG else "left" if offset > 0 else "right")
        return _finish(ans, label, choices, f"heading offset {offset:+.1f} deg")
    offered = {canon for canon, texts in SYNONYMS.items()
               for t in choices.values() if str(t).lower().strip() in texts}
    rule = {"direction": lambda: _direction(track, offered), "rotation": lambda: _rotation(track),
            "own_direction": lambda: _own_direction(track), "own_turn": lambda: _own_turn(track),
            "distance": lambda: _distance(track)}[kind]
    label, why = rule()
    return _finish(ans, label, choices, why)


def _finish(ans: Answer, label, choices: dict, why: str | None = None) -> Answer:
    if why:
        ans.why = f"{ans.why}; {why}"
    if label is None:
        return ans
    letter = _choose(label, choices)
    if letter is None:
        ans.why += f"; geometry says '{label}', which no choice offers"
        return ans
    ans.answer, ans.letter = choices[letter], letter
    return ans
