"""VLM4D-format multiple-choice questions whose answers are computed from ground truth.

Every answer is derived from the trajectories and cameras (never written by
hand), and a question is only asked when its answer is clear: a motion that is
half lateral and half in depth gets no "which direction" question rather than a
coin-flip answer. Wording and choice sets follow the VLM4D benchmark
(../shared/data/vlm4d): four choices, one of them "no <object> there", the
answer stored as the choice text (an integer for counting questions).

Geometry conventions: "from the camera perspective" integrates each frame's
world motion in that frame's camera axes, so a panning camera does not turn a
still object into a moving one. Rotation direction is as seen by the camera,
which always looks down on the stage: a positive yaw rate (counter-clockwise
from above) reads as counter-clockwise.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field

import numpy as np

from recon4d.geometry import camera_centres
from recon4d.synth.scene import ABSENT_SHAPES, COLOURS, SHAPES, Scene, SceneObject

MOVE_EPS = 0.2  # metres of path below which an object counts as not moving
DOMINANCE = 1.5  # one axis must beat the other by this factor to name a direction
TURN_MIN = math.radians(30.0)  # heading change that counts as turning / rotating
STRAIGHT_MAX = math.radians(5.0)  # heading change below which it is straight / not rotating
FALSE_POSITIVE_SHARE = 0.1


@dataclass
class Question:
    """One question before numbering and shuffling; ``key`` links it across a minimal pair."""

    key: str
    kind: str
    question: str
    choices: list  # four texts (or ints), unshuffled
    answer: str | int
    subject: str | None = None  # the object asked about, None for counting and absent objects
    evidence: dict = field(default_factory=dict)


@dataclass
class Motion:
    """Ground-truth motion measures of one object, the inputs of every answer."""

    path: float  # metres travelled
    lateral: float  # metres to the camera's right (summed in per-frame camera axes)
    depth: float  # metres along the camera's viewing axis (+ = away)
    radial: float  # change of distance to the camera caused by the object's motion
    forward: float  # metres travelled along its own heading
    yaw_change: float  # radians, + = counter-clockwise from above (a left turn)
    seen_rotation: float  # radians of rotation about the camera's line of sight, + = counter-clockwise

    @staticmethod
    def of(obj: SceneObject, viewmats: np.ndarray) -> Motion:
        step = np.diff(obj.centre, axis=0)  # [T-1, 3]
        rot = viewmats[:-1, :3, :3]
        in_cam = np.einsum("tij,tj->ti", rot, step).sum(0)
        eyes = camera_centres(viewmats[:-1])
        to_obj = obj.centre[:-1] - eyes
        to_obj /= np.linalg.norm(to_obj, axis=-1, keepdims=True)
        heading = np.stack([np.cos(obj.yaw[:-1]), np.sin(obj.yaw[:-1]), np.zeros(len(step))], -1)
        dyaw = np.diff(obj.yaw)
        return Motion(
            path=float(np.linalg.norm(step, axis=-1).sum()),
            lateral=float(in_cam[0]),
            depth=float(in_cam[2]),
            radial=float((step * to_obj).sum()),
            forward=float((step * heading).sum()),
            yaw_change=float(dyaw.sum()),
            seen_rotation=float((dyaw * -to_obj[:, 2]).sum()),
        )

    @property
    def moving(self) -> bool:
        return self.path > MOVE_EPS

    def camera_direction(self) -> str | None:
        if not self.moving:
            return "not moving"
        lat, dep = abs(self.lateral), abs(self.depth)
        if lat >= DOMINANCE * dep:
            return "right" if self.lateral > 0 else "left"
        if dep >= DOMINANCE * lat:
            return "away from the camera" if self.depth > 0 else "towards the camera"
        return None

    def _along_path(self, value: float, share: float, positive: str, negative: str) -> str | None:
        """The sign of one component of the travel when it is at least ``share`` of the path ("not moving" when
        the object does not move; None in between)."""
        if not self.moving:
            return "not moving"
        if abs(value) >= share * self.path:
            return positive if value > 0 else negative
        return None

    def distance(self) -> str | None:
        return self._along_path(self.radial, 0.6, "going further away", "coming closer")

    def rotation(self) -> str | None:
        if abs(self.yaw_change) < STRAIGHT_MAX:
            return "not rotating"
        if abs(self.yaw_change) >= TURN_MIN and abs(self.seen_rotation) >= 0.1 * abs(self.yaw_change):
            return "counter-clockwise" if self.seen_rotation > 0 else "clockwise"
        return None

    def own_direction(self) -> str | None:
        return self._along_path(self.forward, 0.5, "forwards", "backwards")

    def own_turn(self) -> str | None:
        if not self.moving:
            return None
        if abs(self.yaw_change) < STRAIGHT_MAX:
            return "moving straight and not turning"
        if abs(self.yaw_change) >= TURN_MIN:
            return "left" if self.yaw_change > 0 else "right"
        return None

    @property
    def spinning_in_place(self) -> bool:
        return not self.moving and abs(self.yaw_change) >= TURN_MIN


# kind -> (question about {name}, the three choices other than "no <name> there")
PER_OBJECT = {
    "camera_direction_lateral": ("From the camera perspective, what direction is the {name} moving towards?",
                                 ("left", "right", "not moving")),
    "camera_direction_depth": ("From the camera perspective, what direction is the {name} moving towards?",
                               ("towards the camera", "away from the camera", "not moving")),
    "distance": ("Is the {name} coming closer or moving further away?", ("coming closer", "going further away", "not moving")),
    "rotation": ("Is the {name} rotating clockwise or counter-clockwise?", ("clockwise", "counter-clockwise", "not rotating")),
    "own_direction": ("Is the {name} moving forwards or backwards from its own perspective?",
                      ("forwards", "backwards", "not moving")),
    "own_turn": ("Is the {name} turning to the left or right from its own perspective?",
                 ("left", "right", "moving straight and not turning")),
}


def _per_object(kind: str, name: str) -> tuple[str, list]:
    """Question text and the three choices other than "no <name> there" for ``kind``."""
    if kind not in PER_OBJECT:
        raise ValueError(kind)
    text, choices = PER_OBJECT[kind]
    return text.format(name=name), list(choices)


def _object_questions(obj: SceneObject, m: Motion) -> list[Question]:
    direction = m.camera_direction()
    family = "camera_direction_depth" if direction and "camera" in direction else "camera_direction_lateral"
    asked = [
        (family, direction),
        ("distance", m.distance()),
        ("rotation", m.rotation()),
        ("own_direction", m.own_direction()),
        ("own_turn", m.own_turn()),
    ]
    out = []
    for kind, answer in asked:
        if answer is None:
            continue
        text, choices = _per_object(kind, obj.name)
        out.append(
            Question(
                key=f"{kind.removesuffix('_lateral').removesuffix('_depth')}:{obj.name}",
                kind=kind,
                question=text,
                choices=choices + [f"no {obj.name} there"],
                answer=answer,
                subject=obj.name,
                evidence={k: round(v, 4) for k, v in vars(m).items()},
            )
        )
    return out


def _relative_heading(leader: SceneObject, follower: SceneObject) -> Question:
    """Which side of the leader's travel direction the follower heads to (follow pairs)."""
    lv = leader.centre[-1] - leader.centre[0]
    fv = follower.centre[-1] - follower.centre[0]
    cross = float(lv[0] * fv[1] - lv[1] * fv[0])
    angle = math.degrees(math.atan2(cross, float(lv[:2] @ fv[:2])))
    answer = "same direction" if abs(angle) < 5.0 else ("left" if angle > 0 else "right")
    return Question(
        key=f"relative_heading:{follower.name}:{leader.name}",
        kind="relative_heading",
        question=f"Relative to the direction the {leader.name} is moving, is the {follower.name} heading to its left or to its right?",
        choices=["left", "right", "same direction", f"no {follower.name} there"],
        answer=answer,
        subject=follower.name,
        evidence={"heading_offset_deg": round(angle, 3)},
    )


def _counting(scene: Scene, motions: list[Motion]) -> list[Question]:
    """Counting questions; with one object only the shape count (the rest would be 0/1 giveaways)."""
    directions = [m.camera_direction() for m in motions]
    first = scene.objects[0].shape
    counts = [(f"count_{first}", f"How many {first}s are there in the video?", sum(o.shape == first for o in scene.objects))]
    if len(scene.objects) > 1:
        if None not in directions:
            for side in ("left", "right"):
                text = f"How many objects are moving to the {side} from the camera perspective?"
                counts.append((f"count_{side}", text, directions.count(side)))
        counts.append(("count_still", "How many objects stay in the same place throughout the video?", sum(not m.moving for m in motions)))
        counts.append(("count_spinning", "How many objects are spinning in place?", sum(m.spinning_in_place for m in motions)))
    return [Question(key=key, kind="count", question=q, choices=[0, 1, 2, 3], answer=n) for key, q, n in counts]


def _absent_names(scene: Scene) -> list[str]:
    present = {o.name for o in scene.objects}
    names = [f"{c} {s}" for c in COLOURS for s in (*SHAPES, *ABSENT_SHAPES)]
    return [n for n in names if n not in present]


def ask(scene: Scene) -> list[Question]:
    """Every question with a clear ground-truth answer, before false positives and shuffling."""
    motions = [Motion.of(o, scene.viewmats) for o in scene.objects]
    questions = [q for o, m in zip(scene.objects, motions) for q in _object_questions(o, m)]
    for obj in scene.objects:
        if obj.motion.startswith("follow"):
            questions.append(_relative_heading(scene.objects[0], obj))
    questions += _counting(scene, motions)
    return questions


def add_false_positives(scene: Scene, questions: list[Question]) -> list[Question]:
    """Add questions about absent objects so that they are about 10% of all questions."""
    n = max(1, round(len(questions) * FALSE_POSITIVE_SHARE / (1 - FALSE_POSITIVE_SHARE)))
    rng = np.random.default_rng([scene.seed, 7])
    names = rng.permutation(_absent_names(scene))[:n]
    kinds = ["camera_direction_lateral", "rotation", "distance", "own_turn"]
    extra = []
    for i, name in enumerate(names):
        kind = kinds[i % len(kinds)]
        text, choices = _per_object(kind, str(name))
        none = f"no {name} there"
        extra.append(Question(f"absent:{kind}:{name}", "absent_" + kind, text, choices + [none], none))
    return questions + extra


def to_vlm4d(scene: Scene, questions: list[Question]) -> tuple[list[dict], list[dict]]:
    """Number, shuffle (seeded per question key, so pair scenes match) and format.

    Returns the VLM4D entries for qa.json and, in the same order, the metadata
    (kind, key, subject, evidence) that gt/questions.json keeps beside them.
    """
    entries, meta = [], []
    for i, q in enumerate(questions):
        rng = np.random.default_rng([scene.seed, zlib.crc32(q.key.encode())])
        order = rng.permutation(len(q.choices))
        qid = f"{scene.scene_id}_q{i:02d}"
        entries.append(
            {
                "id": qid,
                "video": f"{scene.scene_id}/video.mp4",
                "question_type": "multiple-choice",
                "question": q.question,
                "choices": {letter: q.choices[k] for letter, k in zip("ABCD", order)},
                "answer": q.answer,
            }
        )
        meta.append({"id": qid, "key": q.key, "kind": q.kind, "subject": q.subject, "evidence": q.evidence})
    return entries, meta
