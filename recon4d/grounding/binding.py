"""Noun phrases of real questions -> the fitted objects they name.

Why this is hard: the fit knows no classes. What it knows about an object is its
colour, its shape (synthetic scenes with id masks), where it is (nearer or
farther, left or right in the image), how big it is and how many Gaussians make
it. So a phrase binds by what it says that the geometry can check:

- a shape noun ("the red cube") or "object" must match shape and colour exactly,
  so an object of another colour or shape is absent (the synthetic scenes) -
  where some object's shape is known at all; without id masks "the ball" is a
  real noun like any other;
- a real noun's colour ("the person in red", "the boxer with the blue helmet")
  only chooses among several objects: the median colour of a fitted person is
  not the colour of their shirt;
- "in the foreground / background", "the left one", "the bigger one" choose the
  nearest / farthest / leftmost / largest, when the gap is clear; with one moving
  object, a phrase that sets its thing behind ("the people in the background")
  names something other than that object, the clip's subject: it is there (the
  phrase says where) and it does not move;
- a bare noun binds to the only object, or to the clearly most prominent one
  (twice the Gaussians of any other: a car and its shadow); a shape noun whose
  shape nothing knows (no id masks) binds by its colour alone;
- a plural noun ("the bears", "how many camels") names the group left;
- a bare noun for a thing fixed where it stands (``FIXED``: a tree, a bench, a building) names
  part of the static scene: there, and still.

And since nothing tells a motorbike from flower pots, a scene's questions are
read together (``SceneNouns``): the fitted objects are taken to be what the
scene's questions name most often, or what that rides or who rides it (a person
and their cart move as one); a bare noun for something else (the flower
pots of a motorbike clip) is then not bound to them. Where two kinds are named
equally often, either may be what moves: on the 29 of VLM4D's 210 DAVIS scenes
whose questions tie, 48 of the 77 questions about the tied kinds have an answer
in motion (a cow and its rodeo rider, boats and the people paddling them), 17 a
still one and 12 "there are none". A phrase with a colour, a
place or a size picks by those instead.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from recon4d.grounding.objects import HUES
from recon4d.grounding.relations import camera_depth, image_x
from recon4d.grounding.shape import SHAPES, nameable
from recon4d.grounding.trajectories import ObjectTrack, SceneTracks

COLOUR_WORDS = set(HUES) | {"white", "grey", "gray", "black"}
# Shape nouns the answerer knows: the shapes it can estimate (and synonyms), and shapes it never
# estimates, which therefore no object with a known shape has.
SHAPE_NOUNS = {**{s: s for s in (*SHAPES, "cone", "pyramid", "ring")}, "sphere": "ball"}
IRREGULAR = {"people": "person", "men": "man", "women": "woman", "children": "child", "kids": "kid",
             "deer": "deer", "sheep": "sheep", "fish": "fish", "fishes": "fish", "geese": "goose", "mice": "mouse"}
# Words for a person: one class for the scene's noun tally ("the dancer" and "the person" are one object).
PERSON_NOUNS = {"person", "man", "woman", "boy", "girl", "child", "kid", "lady", "guy", "adult", "dancer", "rider",
                "biker", "cyclist", "skater", "skier", "surfer", "runner", "player", "driver", "athlete", "swimmer"}
# What a person rides or pushes: it moves as one body with them, so a clip's one moving object is both
# "the person" and "the cart" (DAVIS soapbox's annotation is the cart with its riders, as a motocross
# annotation is bike and rider).
RIDDEN = {"bike", "bicycle", "motorbike", "motorcycle", "scooter", "skateboard", "snowboard", "surfboard", "cart",
          "kart", "kayak", "canoe", "sled", "stroller", "wheelchair", "horse", "camel"}
# Things fixed where they stand: part of the static scene the fit reconstructs, never one of its moving objects.
# Why by the noun: the fit knows no classes, and to the geometry the tree behind a running dog is more static
# background; "where is the tree moving" then has the one answer the reconstruction supports. A plant someone
# holds ("the plant that the person is holding") is not bare, and a pole vaulter's pole is not fixed.
FIXED = {"tree", "bench", "building", "house", "wall", "fence", "rock", "mountain", "hill", "bridge", "statue", "pot",
         "lamppost", "pillar", "tower", "road", "street"}
QUALIFIER = re.compile(r"\b(?:in|with|on|wearing|holding|without|of|that|who|near|at|from)\b")
CLEAR_DEPTH = 1.15  # the nearest object must be this much nearer than the next to be "in the foreground"
CLEAR_X = 0.05  # image-x gap (about 5% of the view's width) for "the one on the left"
CLEAR_SIZE = 1.2
PROMINENT = 2.0  # Gaussians of the most prominent object over any other's, for a bare noun among several


@dataclass
class NounPhrase:
    """What a subject phrase says that the geometry can check."""

    text: str
    head: str  # singular head noun ("camel" of "the camels in the foreground")
    plural: bool
    colours: list[str] = field(default_factory=list)
    shape: str | None = None
    place: str | None = None  # "near", "far", "left", "right"
    size: str | None = None  # "big", "small"

    @property
    def bare(self) -> bool:
        """No colour, place, size or shape: only the noun says which thing it is."""
        return not (self.colours or self.place or self.size or self.shape)

    @property
    def kind(self) -> str:
        """The noun's class for the scene tally: "person" for any word for a person."""
        return "person" if self.head in PERSON_NOUNS else self.head


def singular(word: str) -> tuple[str, bool]:
    """Singular form of a noun and whether it was plural."""
    if word in IRREGULAR:
        return IRREGULAR[word], IRREGULAR[word] != word or word in ("deer", "sheep")
    for ending, repl in (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("sses", "ss"), ("xes", "x")):
        if word.endswith(ending):
            return word[: -len(ending)] + repl, True
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1], True
    return word, False


def noun_phrase(text: str) -> NounPhrase:
    words = text.lower().replace("-", " ").split()
    words = [w for w in words if w not in ("the", "a", "an", "this", "that")]
    joined = " ".join(words)
    cut = QUALIFIER.search(joined)
    core = (joined[: cut.start()] if cut else joined).split() or words or ["object"]
    place = ("near" if re.search(r"\b(?:foreground|front|nearest|closest|closer)\b", joined) else
             "far" if re.search(r"\b(?:background|back|farthest|furthest)\b", joined) else
             "left" if re.search(r"\bleft\b", joined) else "right" if re.search(r"\bright\b", joined) else None)
    size = ("big" if re.search(r"\b(?:big|bigger|biggest|large|larger|largest)\b", joined) else
            "small" if re.search(r"\b(?:small|smaller|smallest|little)\b", joined) else None)
    head_word = next((w for w in reversed(core) if w not in ("one", "ones", "left", "right")), core[-1])
    head, plural = singular(head_word)
    if head_word in ("ones",):
        plural = True
    colours = [w.replace("gray", "grey") for w in words if w in COLOUR_WORDS]
    shape = next((SHAPE_NOUNS[w] for w in (head_word, head) if w in SHAPE_NOUNS), None)
    return NounPhrase(text, head, plural, colours, shape, place, size)


@dataclass
class SceneNouns:
    """How often a scene's questions name each class of subject: the most named is what the objects are taken for."""

    counts: Counter

    @classmethod
    def of(cls, subjects: list[str]) -> SceneNouns:
        return cls(Counter(noun_phrase(s).kind for s in subjects if s and s != "camera"))

    @property
    def principals(self) -> set[str]:
        """The classes named most often: one, or several on a tie."""
        top = max(self.counts.values(), default=0)
        return {kind for kind, n in self.counts.items() if n == top}

    def names_objects(self, phrase: NounPhrase) -> bool:
        """Whether a bare ``phrase`` may name the fitted objects: it is a principal class, or a principal
        rides it or is its rider (``RIDDEN``)."""
        if len(self.counts) <= 1 or phrase.kind in self.principals:
            return True
        return any({phrase.kind, p} & RIDDEN and "person" in (phrase.kind, p) for p in self.principals)


@dataclass
class Binding:
    """The object(s) a phrase names. ``status``: bound, group, absent, ambiguous, unsure, other (not the kind of
    thing the scene's questions name most), empty or still (present, not one of the moving objects)."""

    status: str
    why: str
    tracks: list[ObjectTrack] = field(default_factory=list)

    @property
    def track(self) -> ObjectTrack | None:
        return self.tracks[0] if self.status == "bound" else None


def bind(name: str, st: SceneTracks, nouns: SceneNouns | None = None, group: bool = False) -> Binding:
    """Bind the phrase ``name`` to the scene's objects (``group``: a count's noun, every object it may name);
    where a bare noun binds as one of several kinds the questions name equally often, its why says so."""
    binding = _bind(name, st, nouns, group)
    if binding.status in ("bound", "group") and noun_phrase(name).bare and nouns is not None \
            and len(nouns.principals) > 1:
        tied = " and ".join(sorted(nouns.principals))
        binding.why = f"assumed ({tied} named equally often: either may be what moves): {binding.why}"
    return binding


def _bind(name: str, st: SceneTracks, nouns: SceneNouns | None, group: bool) -> Binding:
    np_ = noun_phrase(name)
    shapes_known = any(t.obj.shape is not None for t in st.tracks)  # id masks gave shapes: "the ball" is checkable
    # ... unless the silhouette test cannot name that shape here (a cube without the camera's pitch)
    checkable = shapes_known and np_.shape in nameable(st.pitch_known)
    if np_.shape is not None and checkable or np_.head == "object":
        cands, why = _by_looks(np_, st.tracks)
        if cands is None:
            return why
    elif np_.shape is not None:  # a plain-coloured thing whose shape nothing here can know: colour decides
        cands = [t for t in st.tracks if (not np_.colours or t.obj.colour in np_.colours) and t.obj.shape in (None, np_.shape)]
    else:
        if np_.bare and np_.head in FIXED:
            return Binding("still", f"'{name}': a thing fixed where it stands, part of the static scene")
        if np_.bare and nouns is not None and not nouns.names_objects(np_):
            most = " and ".join(sorted(nouns.principals))
            return Binding("other", f"'{name}' is not what this scene's questions name most ({most}): "
                                    "taken to be none of the moving objects")
        if not st.tracks:
            return Binding("empty", f"no moving object in the scene for '{name}'")
        cands = list(st.tracks)
        if np_.colours and len(cands) > 1:
            coloured = [t for t in cands if t.obj.colour in np_.colours]
            cands = coloured or cands
        if np_.place == "far" and len(cands) == 1:
            return Binding("still", f"'{name}': set behind the one moving object, which is the clip's subject: "
                                    "something else, there and still")
    cands, why = _by_place(np_, cands, st.viewmats)
    if cands is None:
        return why
    if group or np_.plural:
        if not cands:
            return Binding("absent", f"no fitted object is {name}")
        return Binding("group", f"'{name}': {len(cands)} object(s)", cands)
    if len(cands) == 1:
        return Binding("bound", f"'{name}' -> {cands[0].obj.label}", cands)
    if not cands:
        return Binding("absent", f"absent: no fitted object is {name}")
    counts = sorted((len(t.obj.gaussians), i) for i, t in enumerate(cands))
    if counts[-1][0] >= PROMINENT * counts[-2][0] and np_.shape is None:
        best = cands[counts[-1][1]]
        return Binding("bound", f"assumed: '{name}' is the most prominent of {len(cands)} objects ({best.obj.label})", [best])
    return Binding("ambiguous", f"ambiguous: {len(cands)} objects may be '{name}'", cands)


def _by_looks(np_: NounPhrase, tracks: list[ObjectTrack]) -> tuple[list | None, Binding | None]:
    """Exact colour and shape matching for shape nouns (an object of an unknown shape may be the one)."""
    colour = np_.colours[0] if np_.colours else None
    shape = np_.shape
    looks = " ".join(w for w in (colour, shape) if w) or np_.text
    hits = [t for t in tracks if colour in (None, t.obj.colour) and shape in (None, t.obj.shape)]
    unsure = [t for t in tracks if colour in (None, t.obj.colour) and shape is not None and t.obj.shape is None]
    if unsure:
        return None, Binding("unsure", "unsure: shape unknown for " + "; ".join(f"{t.obj.label} ({t.obj.shape_note})" for t in unsure))
    if not hits:
        return None, Binding("absent", f"absent: no fitted object is {'a ' + looks if shape else looks}")
    return hits, None


def _by_place(np_: NounPhrase, cands: list[ObjectTrack], viewmats: np.ndarray) -> tuple[list | None, Binding | None]:
    """Keep the nearest / farthest / leftmost / rightmost / biggest / smallest candidate, when the gap is clear."""
    if len(cands) < 2 or (np_.place is None and np_.size is None):
        return cands, None
    if np_.place in ("near", "far"):
        value = [float(np.median(camera_depth(t, viewmats))) for t in cands]
        sign, clear = (1, lambda a, b: b >= CLEAR_DEPTH * a) if np_.place == "near" else (-1, lambda a, b: a >= CLEAR_DEPTH * b)
    elif np_.place in ("left", "right"):
        value = [float(np.median(image_x(t, viewmats))) for t in cands]
        sign, clear = (1, lambda a, b: b - a >= CLEAR_X) if np_.place == "left" else (-1, lambda a, b: a - b >= CLEAR_X)
    else:
        value = [t.motion.size for t in cands]
        sign, clear = (-1, lambda a, b: a >= CLEAR_SIZE * b) if np_.size == "big" else (1, lambda a, b: b >= CLEAR_SIZE * a)
    order = sorted(range(len(cands)), key=lambda i: sign * value[i])
    first, second = value[order[0]], value[order[1]]
    what = np_.place or np_.size
    if not clear(first, second):
        return None, Binding("ambiguous", f"'{np_.text}': the two most {what} objects are too close ({first:.2f}, {second:.2f})")
    return [cands[order[0]]], None
