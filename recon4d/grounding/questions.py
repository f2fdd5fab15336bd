"""VLM4D question wording -> a question kind, its subject(s) and the label asked about.

Why a parser of its own: the real VLM4D questions (795 on DAVIS) say the same few
things in many words ("towards or away from the camera", "closer or further",
"coming closer", "uphill or downhill", "landing or taking off"), add a frame of
reference ("from its own perspective", "from the camera perspective", "from the
car's perspective"), a time window ("at the start of the video") and typos. The
parser first takes those phrases out (they say which frame and which frames),
then splits what is left into an auxiliary, a subject and a verb, and reads the
kind off the rest. Every kind it returns has a geometric rule in
``recon4d.grounding.rules``; wording it does not know is "unsupported" (hands,
dribbles, hits: nothing the object trajectories show).
"""

from __future__ import annotations

import re

# Typos and spellings seen in the benchmark, fixed before anything is matched.
SPELLING = {r"\bcl\w*kswise\b": "clockwise", r"\bclckswise\b": "clockwise", r"\bturining\b": "turning",
            r"\btrun\b": "turn", r"\bdirectionis\b": "direction is", r"\bhelicoptor\b": "helicopter",
            r"\bplances\b": "planes", r"\bbicyclec\b": "bicycle", r"\bdose\b": "does", r"\btoward\b": "towards",
            r"\banti-?clockwise\b": "counter-clockwise", r"\bcounterclockwise\b": "counter-clockwise",
            r"\bare moving are moving\b": "are moving", r"’": "'", r"^in which (direction|way)\b": r"which \1"}
WINDOWS = [("start", r"(?:at|in|during|near|towards) the (?:very )?(?:start|beginning|first part|first half) of the (?:video|clip)"),
           ("end", r"(?:at|in|during|near|towards) the (?:very )?(?:end|last part|second half) of the (?:video|clip)"),
           ("all", r"throughout the (?:video|clip)")]
PERSPECTIVE = r"from (?:the )?(?P<p>[a-z][a-z -]*?)(?:'s|s'|')? (?:own )?perspectives?"
PRONOUNS = {"it", "they", "he", "she", "its", "their", "his", "her", "them"}
VERBS = ("moving|going|coming|getting|rotating|spinning|turning|flying|walking|running|driving|swimming|riding|"
         "climbing|jumping|flipping|rolling|heading|pedall?ing|diving|landing|taking|sliding|travell?ing|skating|"
         "paddl?ing|being|sailing|crawling|falling|rising|floating|going|move|moved|go|went|turn|turned|spin|spun|"
         "rotate|fly|flew|walk|run|ran|drive|swim|ride|jump|jumped|come|came|head|roll|flip|dive|land|travel|slide|"
         "skate|hit|throw|threw|kick|kicked|facing")
SUBJECT = rf"(?:the |this |a )?(?P<a>[a-z][a-z' -]*?) (?P<verb>{VERBS})\b(?P<rest>.*)"
UP_WORDS = r"\b(?:up|upwards?|uphill|taking off|coming out|rising|ascending)\b"
DOWN_WORDS = r"\b(?:down|downwards?|downhill|landing|diving|descending|falling)\b"
STILL = r"\b(?:not moving|standing still|standing in place|stay(?:ing)? in the same place|never moved|parked|stationary|still)\b"
OBJECT_TOOLS = {"hit", "throw", "threw", "kick", "kicked", "move", "moved"}  # "did X hit the ball ...": the ball moves
ROTATION_NOUNS = r"(?:full )?(?:revolutions|rotations|spins|flips|turns)"


def normalise(question: str) -> str:
    text = " ".join(question.lower().strip().split())
    for wrong, right in SPELLING.items():
        text = re.sub(wrong, right, text)
    return text


def parse(question: str) -> tuple[str, dict]:
    """Kind and parts of a question: subjects ``a``/``b``, ``label`` asked about, ``frame``, ``window`` and more.

    ``frame`` is "own" or "camera" where the question says; ``window`` "start", "end"
    or "all"; a pronoun subject ("is it turning") is the noun of "from the car's
    perspective". Kind "unsupported" when no wording fits.
    """
    text = normalise(question)
    parts: dict = {"window": "all"}
    for name, pattern in WINDOWS:
        if re.search(pattern, text):
            parts["window"] = name
            text = re.sub(r",? ?" + pattern + r",?", " ", text)
    m = re.search(PERSPECTIVE, text)
    if m:
        who = m.group("p").strip()
        parts["frame"] = "camera" if who == "camera" else "own"
        if who != "camera" and who not in PRONOUNS:
            parts["perspective_of"] = who
        text = re.sub(r",? ?" + PERSPECTIVE + r",?", " ", text)
    text = " ".join(text.replace("?", " ").split()).strip(" ,")
    kind, found = _kind(text)
    parts.update({k: v.strip() for k, v in found.items() if v is not None})
    for key in ("a", "b"):
        if parts.get(key) in PRONOUNS:
            if "perspective_of" not in parts:
                return "unsupported", {}
            parts[key] = parts["perspective_of"]
    if kind == "rotation":  # "spinning" asks about a spin, not any turn of the path (rules.rotation)
        parts["spin"] = bool(re.search(r"\b(?:spin|spins|spinning|spun)\b", text))
    if kind in ("turn", "count_turn"):  # a turn without a frame is the object's own, as VLM4D asks it
        kind = kind.replace("turn", "seen_turn" if parts.get("frame") == "camera" else "own_turn")
    return kind, parts


def _object_of(m: re.Match) -> str:
    """The subject, or for "did the person move the drone ..." the thing moved (the drone)."""
    rest = m.group("rest").strip()
    held = re.match(r"^(?:the|his|her|their) (?P<o>[a-z -]+?)(?: (?:to|towards|in|into|up|down)\b|$)", rest)
    if m.group("verb") in OBJECT_TOOLS and held:
        return held.group("o")
    return m.group("a")


def _wh(m: re.Match) -> tuple[str, dict]:
    """ "What direction / which way is X <verb> ...": a turn, or a direction."""
    if m.group("verb").startswith("turn"):
        return "turn", {"a": m.group("a")}
    if m.group("verb") == "facing":
        return "facing", {"a": m.group("a")}
    if "clockwise" in m.group("rest") or m.group("verb") in ("spinning", "rotating", "spin", "rotate"):
        return "rotation", {"a": m.group("a")}  # "which way is the dog spinning": a sense of rotation
    return "direction", {"a": _object_of(m)}


def _yes_no(m: re.Match) -> tuple[str, dict]:
    """ "Is X <verb> A or B": the kind is what the two alternatives are about."""
    rest, verb, a = m.group("rest"), m.group("verb"), m.group("a")
    whole = f"{verb}{rest}"
    if "clockwise" in rest:
        return ("rotation", {"a": a}) if not verb.startswith("pedal") else ("unsupported", {})
    if re.search(r"same or opposite direction", rest):
        return "pair_heading", {"a": a}
    if re.search(r"(?:towards|closer to)(?: or away from)? each other|away from each other", rest):
        return "pair_gap", {"a": a}
    if verb.startswith("turn") and re.search(r"\b(?:left|right)\b", rest):
        return "turn", {"a": a}
    if re.search(r"\bforwards? or backwards?\b", rest):
        return "own_direction", {"a": a}
    if re.search(r"\btowards\b(?: the camera)?(?: or away)|\bcloser\b|\bfurther\b|\bfarther\b|\baway from the camera\b", rest):
        return "distance", {"a": a}
    if re.search(UP_WORDS, whole) and re.search(DOWN_WORDS, whole) or re.search(r"\bup or down\b", rest):
        return "vertical", {"a": a}
    if re.search(r"\b(?:left|right)\b.* or\b", rest) or re.search(r"\bor (?:to )?(?:the )?(?:left|right)\b", rest):
        return "direction", {"a": _object_of(m)}
    return "unsupported", {}


def _origin(m: re.Match) -> tuple[str, dict] | None:
    """ "What direction did X come from": where it came from; other verbs are no origin question."""
    return ("origin", {"a": m.group("a")}) if m.group("verb") in ("come", "came") else None


# The wordings ``_kind`` knows, in the order they are tried: (re.match or re.search, pattern, what it means):
# a kind (with the pattern's named groups as the parts) or a function of the match giving (kind, parts), or
# None when the match is not that question after all.
WORDINGS = [
    (re.match, r"^is the camera (?:rotating|moving|going|turning) clockwise or counter-clockwise around (?:the )?(?P<a>[a-z' -]+)",
     "camera_orbit"),
    (re.search, r"\bcamera (?:turn|turned|pan|panned|rotate|rotated|tilt|tilted)\b", "camera_turn"),
    (re.match, r"^(?:is|was) the camera (?:moving|going) (?:towards|closer|away)(?:.*? (?:from|to) (?:the )?(?P<a>[a-z' -]+))?",
     "camera_move"),
    (re.search, r"relative to the direction the (?P<a>.+?) is moving, is the (?P<b>.+?) heading to its left or",
     "relative_heading"),
    (re.match, r"^which (?P<a>[a-z -]+?) is (?:leading|ahead|in front|in the lead)\b", "leading"),
    (re.match, r"^(?:what|which) direction did " + SUBJECT, _origin),
    (re.match, r"^(?:the )?(?P<x>[a-z -]+?) (?:threw|throws|hit|hits|kicked|kicks) (?:the|his|her|their) "
               r"(?P<a>[a-z -]+?) (?:in|to|towards) which direction", lambda m: ("direction", {"a": m.group("a")})),
    (re.match, r"^(?:what|which) (?:direction|way) (?:is|are|was|were|did|does|do) " + SUBJECT, _wh),
    (re.match, r"^which way is (?:the )?(?P<a>[a-z -]+?) (?:rotating|spinning|turning), clockwise or", "rotation"),
    (re.match, r"^how is (?:the )?(?P<a>[a-z -]+?) (?:rotating|spinning|turning)$", "rotation"),
    (re.match, r"^(?:is|are|was|were|did|does|do) " + SUBJECT, _yes_no),
]


def _kind(text: str) -> tuple[str, dict]:
    """The kind of a question already stripped of its window and perspective phrases."""
    if text.startswith("how many"):
        return _count(text)
    for find, pattern, meaning in WORDINGS:
        m = find(pattern, text)
        if not m:
            continue
        found = (meaning, m.groupdict()) if isinstance(meaning, str) else meaning(m)
        if found is not None:
            return found
    return "unsupported", {}


def _label(pred: str) -> str | None:
    """The direction a count's predicate names ("walking to the left" -> "left"), or None."""
    for label, pattern in (("left", r"\bto(?:wards)? the left\b|\bleft\b"), ("right", r"\bto(?:wards)? the right\b|\bright\b"),
                           ("towards", r"\btowards the camera\b|\bcloser\b|\bcoming towards\b"),
                           ("away", r"\baway from the camera\b|\bfurther away\b|\bfarther away\b"),
                           ("up", r"\b(?:up|upwards|uphill)\b"), ("down", r"\b(?:down|downwards|downhill)\b")):
        if re.search(pattern, pred):
            return label
    return None


def _sense(text: str) -> str | None:
    if "counter-clockwise" in text:
        return "counter-clockwise"
    return "clockwise" if "clockwise" in text else None


# "How many steps does the boy take to the left", and the same events with the verb for the noun ("how many
# times does the boy somersault to the left")
STEP_COUNTS = (
    r"^how many (?:steps|somersaults|flips|cartwheels) (?:does|did|do) (?:the |this )?(?P<a>[a-z -]+?) "
    r"(?:take|do|make|perform|complete)\b(?P<rest>.*)",
    r"^how many times (?:does|did|do) (?:the |this )?(?P<a>[a-z -]+?) (?:somersault|flip|cartwheel)s?\b(?P<rest>.*)",
)


def _count(text: str) -> tuple[str, dict]:
    """ "How many ..." questions: objects that do something, or times one object does something."""
    for steps in STEP_COUNTS:  # a gait's or a sideways flip's events, to one side
        m = re.match(steps, text)
        if m and _label(m.group("rest")) in ("left", "right"):
            return "count_steps", {"a": m.group("a"), "label": _label(m.group("rest"))}
    m = re.match(rf"^how many (?P<sense>clockwise |counter-clockwise )?{ROTATION_NOUNS} (?:does|did|do) (?:the |this )?"
                 r"(?P<a>[a-z -]+?) (?:spin|do|complete|make|rotate|turn|perform)\b(?P<rest>.*)", text)
    if m:
        axis = "sight" if "flips" in text else "up"
        return "count_revolutions", {"a": m.group("a"), "sense": _sense(m.group("sense") or m.group("rest")), "axis": axis}
    m = re.match(r"^how many times (?:does|did|do) (?:the |this )?[a-z -]+? (?:hit|hits|throw|throws|kick|kicks) "
                 r"(?:the |a )?(?P<a>[a-z -]+?) (?P<rest>(?:to|towards) .*)$", text)
    if m:  # each hit sends the thing hit one way: its separate movements that way
        label = _label(m.group("rest"))
        return ("count_moves", {"a": m.group("a"), "label": label}) if label else ("unsupported", {})
    m = re.match(r"^how many times (?:does|did|do|was|is|were|has) (?:the |this )?(?P<a>[a-z -]+?) "
                 r"(?P<verb>jump|hop|bounce|swing|move|go|run|roll|turn|spin|rotate)s?\b(?P<rest>.*)", text)
    if m:
        verb, rest = m.group("verb"), m.group("rest")
        if verb in ("jump", "hop", "bounce"):
            return "count_jumps", {"a": m.group("a"), "label": _label(rest)}
        if verb in ("spin", "rotate"):  # times it spins: each spin counts, not only whole turns
            return "count_revolutions", {"a": m.group("a"), "sense": _sense(rest), "axis": "up", "counted": "spins"}
        label = _label(rest)
        if verb == "turn":
            return ("count_turns", {"a": m.group("a"), "label": label}) if label in ("left", "right") else ("unsupported", {})
        return ("count_moves", {"a": m.group("a"), "label": label}) if label else ("unsupported", {})
    if text.startswith("how many times"):
        return "unsupported", {}
    m = re.match(r"^how many (?P<noun>[a-z -]+?) (?:are|is|were|was|have|has) (?P<pred>.+)$", text) or \
        re.match(rf"^how many (?P<noun>[a-z -]+?) (?P<pred>(?:{VERBS}|not|standing|facing|stay|never)\b.*)$", text)
    if not m:
        return "unsupported", {}
    noun, pred = m.group("noun"), m.group("pred")
    if re.fullmatch(r"there(?: in the (?:video|scene))?", pred):
        return "count_shape", {"a": noun}
    if re.search(STILL, pred) or re.search(r"\bstay(?:s|ed)? in the same place\b", pred):
        return "count_still", {"a": noun}
    if "clockwise" in pred:
        return "count_rotation", {"a": noun, "label": _sense(pred)}
    if re.search(r"\b(?:spinning|rotating)\b", pred):
        return "count_spinning", {"a": noun}
    label = None if re.search(r"\b(?:pick|picking|put|putting)\b", pred) else _label(pred)
    if re.search(r"\bfacing\b", pred):
        return ("count_facing", {"a": noun, "label": label}) if label else ("unsupported", {})
    if re.search(r"\bturning\b", pred):
        return ("count_turn", {"a": noun, "label": label}) if label in ("left", "right") else ("unsupported", {})
    if re.search(r"\b(?:forwards?|backwards?)\b", pred):
        return "count_own_direction", {"a": noun, "label": "backwards" if "backward" in pred else "forwards"}
    if label:
        return "count_direction", {"a": noun, "label": label}
    return "unsupported", {}
