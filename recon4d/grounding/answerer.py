"""Geometric answers to VLM4D-style questions, read off the fitted trajectories (no VLM, no ground truth).

Why: it is the upper bound of what explicit 4D grounding can give, and a check on
the reconstruction: if the fit moved an object the wrong way, the answer is wrong.
A question is parsed into a kind, its subject(s), frame and time window
(``recon4d.grounding.questions``); the subject is bound to fitted objects
(``recon4d.grounding.binding``); the kind's rule (``recon4d.grounding.rules``)
turns the motion measures of that window into a canonical answer (a direction
word or a count); and that answer is matched to one of the choices through a
small synonym table. Whatever cannot be parsed, bound or decided with margin is
answered "cannot tell", with the reason, rather than guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from recon4d.grounding import counts, relations, rules
from recon4d.grounding.binding import (
    Binding,
    SceneNouns,
    bind,
    noun_phrase,
)
from recon4d.grounding.questions import parse
from recon4d.grounding.trajectories import ObjectTrack, SceneTracks, heading_offset_deg

CANNOT_TELL = "cannot tell"
SAME_DIRECTION_DEG, HEADING_DEG = 10.0, 20.0  # relative heading: same below, left/right above
WINDOW_SHARE = 1 / 3  # "at the start / end of the video": the first / last third of the frames
# canonical answer -> texts a choice may use for it
SYNONYMS = {
    "left": {"left", "to the left", "turning left", "towards the left", "to his left", "to her left", "to their left",
             "left direction"},
    "right": {"right", "to the right", "turning right", "towards the right", "to his right", "to her right",
              "to their right", "right direction"},
    "towards": {"towards the camera", "toward the camera", "towards", "toward", "coming closer", "closer",
                "getting closer", "moving closer"},
    "away": {"away from the camera", "away", "going further away", "moving further away", "further away",
             "farther away", "getting farther away", "getting further away", "further", "farther"},
    "up": {"up", "upwards", "upward", "uphill", "taking off", "coming out", "coming out of the water",
           "flying up to the sky", "jumping up", "climbing up"},
    "down": {"down", "downwards", "downward", "downhill", "landing", "diving in", "jumping down to the water",
             "getting down", "climbing down"},
    "above": {"above", "from above"},
    "below": {"below", "from below"},
    "not moving": {"not moving", "stationary", "still", "did not move", "staying in place", "almost stayed in place"},
    "clockwise": {"clockwise"},
    "counter-clockwise": {"counter-clockwise", "counterclockwise", "anticlockwise", "anti-clockwise"},
    "not rotating": {"not rotating", "not spinning", "not flipping"},
    "not turning": {"not turning", "no turn"},
    "forwards": {"forwards", "forward"},
    "backwards": {"backwards", "backward"},
    "straight": {"moving straight and not turning", "straight", "not turning", "no turn"},
    "same direction": {"same direction", "same directions", "the same direction"},
    "opposite direction": {"opposite direction", "opposite directions"},
    "towards each other": {"towards each other", "toward each other"},
    "away from each other": {"away from each other"},
    "the left one": {"the left one", "left one"},
    "the right one": {"the right one", "right one"},
}
# What "not moving" is called in each kind's choices, for subjects that do not move.
STILL_LABEL = {"rotation": "not rotating", "count_revolutions": 0, "count_steps": 0}


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


def answer_question(entry: dict, st: SceneTracks, nouns: SceneNouns | None = None) -> Answer:
    """Answer one VLM4D entry (question + choices) from the scene's trajectories.

    ``nouns``: the subject nouns of all the scene's questions (``scene_nouns``), so
    that a noun the scene's questions name less often than another is not bound
    to the objects the other names; without it a bare noun binds as if alone.
    """
    kind, parts = parse(entry["question"])
    choices = entry["choices"]
    if kind == "unsupported":
        return Answer(kind, CANNOT_TELL, None, "question type not supported by the geometric answerer")
    window = parts.get("window", "all")
    if window != "all":
        T = len(st.viewmats)
        k = max(2, round(WINDOW_SHARE * T))
        st = st.window(0, k) if window == "start" else st.window(T - k, T)
    offered = _offered(choices)
    if kind in ("camera_turn", "camera_move", "camera_orbit"):
        return _camera(kind, parts, st, nouns, offered, choices)
    if kind.startswith("count_") and kind not in EVENT_COUNTS:
        return _count(kind, parts, st, nouns, offered, choices)
    subject = parts["b"] if kind == "relative_heading" else parts["a"]
    binding = bind(subject, st, nouns, group=kind in PAIR_KINDS)
    ans = Answer(kind, CANNOT_TELL, None, binding.why, subject=subject)
    if kind in PAIR_KINDS:
        return _pair(kind, parts, binding, st, nouns, ans, choices)
    if binding.status in ("absent", "empty", "other", "still"):
        return _unbound(kind, binding, ans, choices)
    members = binding.tracks if binding.status in ("bound", "group") else []
    if not members:
        return ans
    ans.bound_to = ", ".join(t.obj.label for t in members)
    if len(members) == 1:
        ans.numbers = _numbers(members[0])
    labels = [_rule(kind, parts, t, st, offered) for t in members]
    got = {label for label, _ in labels}
    why = "; ".join(w for _, w in labels)
    if len(got) != 1:
        return _finish(ans, None, choices, f"the objects disagree: {why}")
    return _finish(ans, got.pop(), choices, why)


def scene_nouns(entries: list[dict]) -> SceneNouns:
    """The subject nouns of a scene's questions, for ``answer_question``'s ``nouns``."""
    return SceneNouns.of([parse(e["question"])[1].get("a", "") for e in entries])


PAIR_KINDS = {"pair_heading", "pair_gap", "leading", "relative_heading"}
EVENT_COUNTS = {"count_jumps", "count_moves", "count_steps", "count_turns", "count_revolutions"}
PER_OBJECT = {
    "direction": lambda t, st, o, p: rules.direction(t, o, st.viewmats),
    "origin": lambda t, st, o, p: rules.origin(t, o, st.viewmats),
    "facing": lambda t, st, o, p: rules.facing(t, o, st.viewmats),
    "distance": lambda t, st, o, p: rules.distance(t, st.viewmats),
    "vertical": lambda t, st, o, p: rules.vertical(t, st.viewmats),
    "rotation": lambda t, st, o, p: rules.rotation(t, st.viewmats, p.get("spin", False)),
    "own_direction": lambda t, st, o, p: rules.own_direction(t),
    "own_turn": lambda t, st, o, p: rules.own_turn(t, st.viewmats),
    "seen_turn": lambda t, st, o, p: rules.seen_turn(t, st.viewmats, st.up),
    "count_jumps": lambda t, st, o, p: counts.count_jumps(t, p.get("label"), st.viewmats, st.up),
    "count_moves": lambda t, st, o, p: counts.count_moves(t, p["label"], st.viewmats, st.up),
    "count_steps": lambda t, st, o, p: counts.count_steps(t, p["label"], st.viewmats, st.up),
    "count_turns": lambda t, st, o, p: counts.count_turns(t, p["label"], st.up),
    "count_revolutions": lambda t, st, o, p: counts.count_revolutions(t, p.get("sense"), p.get("axis", "up"),
                                                                      whole=p.get("counted") != "spins"),
}


def _rule(kind: str, parts: dict, t: ObjectTrack, st: SceneTracks, offered: set[str]):
    return PER_OBJECT[kind](t, st, offered, parts)


def _numbers(t: ObjectTrack) -> dict:
    m = t.motion
    return {k: round(float(getattr(m, k)), 3) for k in ("size", "path", "reach", "lateral", "depth", "rise", "radial",
                                                        "forward", "yaw_deg", "seen_rotation_deg", "spin_deg", "roll_deg")}


def _offered(choices: dict) -> set[str]:
    return {canon for canon, texts in SYNONYMS.items() for t in choices.values() if _text(t) in texts}


def _text(choice) -> str:
    return str(choice).lower().strip().rstrip(".")


def _unbound(kind: str, binding: Binding, ans: Answer, choices: dict) -> Answer:
    """A subject that names no moving object: absent, or (when nothing it could be moves) not moving.

    "empty" (nothing moves at all) means the thing named, if it is there, stands still; whether it is
    there at all the geometry cannot say, so where the choices offer both it cannot tell, and where they
    offer only one of the two, that one is the answer. "other" (the questions name another kind of thing most:
    the clip's subject) is the same, except that where both are offered it is absent: a clip is
    filmed for its subject, and a second kind of thing its questions name once is a distractor
    more often than a bystander (of our 25 clips, 6 such questions, all "there are none"; measured in
    docs/decisions.md). "still": the phrase says the thing is there, and it is none of the moving objects.
    """
    if binding.status == "absent":
        return _finish(ans, "absent", choices)
    still = STILL_LABEL.get(kind, "not moving")
    if binding.status == "still":
        return _finish(ans, still, choices, "it does not move")
    absent_offered, still_offered = (_choose(label, choices) is not None for label in ("absent", still))
    if absent_offered and still_offered and binding.status == "other":
        return _finish(ans, "absent", choices, "not the clip's subject: taken to be a distractor, not a bystander")
    if absent_offered and still_offered:
        return _finish(ans, None, choices, "present and still, or absent: the geometry cannot tell which")
    if absent_offered:
        return _finish(ans, "absent", choices, "present and still, or absent; no choice says it stands still")
    return _finish(ans, still, choices, "it does not move")


def _pair(kind: str, parts: dict, binding: Binding, st: SceneTracks, nouns: SceneNouns | None,
          ans: Answer, choices: dict) -> Answer:
    """Two objects: the follower and its leader (relative heading), or the two of a plural noun."""
    if kind == "relative_heading":
        follower = binding.tracks[0] if len(binding.tracks) == 1 else None
        leader = bind(parts["a"], st, nouns, group=True)
        lead = leader.tracks[0] if len(leader.tracks) == 1 else None
        if follower is None or lead is None or not (lead.motion.moving and follower.motion.moving):
            ans.why += f"; leader: {leader.why}; both must be one object and move"
            if binding.status == "absent":
                return _finish(ans, "absent", choices)
            return ans
        ans.bound_to = follower.obj.label
        ans.numbers = _numbers(follower)
        offset = heading_offset_deg(lead, follower, st.up)
        ans.numbers["heading_offset_deg"] = round(offset, 1)
        label = ("same direction" if abs(offset) < SAME_DIRECTION_DEG else
                 None if abs(offset) < HEADING_DEG else "left" if offset > 0 else "right")
        return _finish(ans, label, choices, f"heading offset {offset:+.1f} deg")
    pair = sorted(binding.tracks, key=lambda t: -len(t.obj.gaussians))
    if binding.status == "absent":
        return _finish(ans, "absent", choices)
    if len(pair) != 2:
        return _finish(ans, None, choices, f"needs two objects, {len(pair)} found")
    a, b = pair
    ans.bound_to = f"{a.obj.label}, {b.obj.label}"
    label, why = {"pair_heading": lambda: relations.pair_heading(a, b, st.up), "pair_gap": lambda: relations.pair_gap(a, b),
                  "leading": lambda: relations.leading(a, b, st.viewmats)}[kind]()
    return _finish(ans, label, choices, why)


def _camera(kind: str, parts: dict, st: SceneTracks, nouns: SceneNouns | None, offered: set[str],
            choices: dict) -> Answer:
    """Questions about the camera's own motion: its turn, its travel, its orbit round an object."""
    ans = Answer(kind, CANNOT_TELL, None, "the camera's own motion", subject="camera")
    target = bind(parts["a"], st, nouns).track if parts.get("a") else None
    if kind == "camera_turn":
        label, why = relations.camera_turn(st)
    elif kind == "camera_move":
        label, why = relations.camera_move(st, target, offered)
    elif target is None:
        label, why = None, f"no single object '{parts.get('a')}' to go round"
    else:
        label, why = relations.camera_orbit(st, target)
    return _finish(ans, label, choices, why)


def _count(kind: str, parts: dict, st: SceneTracks, nouns: SceneNouns | None, offered: set[str],
           choices: dict) -> Answer:
    """How many objects of the named kind satisfy the kind's predicate; None when any of them is unsure."""
    ans = Answer(kind, CANNOT_TELL, None, "", subject=parts.get("a"))
    if kind == "count_shape":
        n, why = _count_shape(parts["a"], st)
        return _finish(ans, n, choices, why)
    noun = parts.get("a", "objects")
    binding = bind(noun, st, nouns, group=True)
    ans.why = binding.why
    if binding.status in ("empty", "other", "absent", "still") and kind != "count_still":
        return _finish(ans, 0, choices, "none of the moving objects is one")
    if binding.status != "group":
        return ans
    label = parts.get("label")
    predicate = {
        "count_direction": lambda t: rules.moves_towards(t, label),
        "count_still": rules.still,
        "count_spinning": lambda t: rules.spinning(t, st.viewmats),
        "count_rotation": rules.labelled(lambda t: rules.rotation(t, st.viewmats), label),
        "count_own_direction": rules.labelled(rules.own_direction, label),
        "count_own_turn": rules.labelled(lambda t: rules.own_turn(t, st.viewmats), label),
        "count_seen_turn": rules.labelled(lambda t: rules.seen_turn(t, st.viewmats, st.up), label),
        "count_facing": rules.labelled(lambda t: rules.facing(t, {label, rules.OPPOSITE[label]}, st.viewmats), label),
    }[kind]
    said = [predicate(t) for t in binding.tracks]
    if any(v is None for v, _ in said):
        return _finish(ans, None, choices, "unsure for " + "; ".join(w for v, w in said if v is None))
    return _finish(ans, sum(bool(v) for v, _ in said), choices, "; ".join(w for _, w in said))


def _count_shape(noun: str, st: SceneTracks) -> tuple[int | None, str]:
    """How many objects have the shape (and colour, if named) of ``noun``; None unless every shape is known."""
    phrase = noun_phrase(noun)
    shape, colour = phrase.shape, (phrase.colours[0] if phrase.colours else None)
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
