"""Geometric answerer and trajectory cues (issue 10).

Fast tests check the rigid tracking on point sets with analytic motion and the
question parsing / choice matching. The fitted tests reuse the session's
``fitted_left_scene`` plus its mirror (same seed, moving right), so that a
direction "pair" is answered from two real fits; the full five-factor
measurement is ``scripts/grounding_eval.py`` (about 10 fits, too slow for CI).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from recon4d.grounding.answerer import CANNOT_TELL, answer_question, parse
from recon4d.grounding.objects import ObjectInstance, colour_word
from recon4d.grounding.trajectories import SceneTracks, track_object

UP = np.array([0.0, 0.0, 1.0])
# A camera at (0, -6, 2.5) looking at the origin (OpenCV axes), as in the synth scenes.
_F = np.array([0.0, 6.0, -2.5]) / np.linalg.norm([0.0, 6.0, -2.5])
_R = np.cross(_F, UP) / np.linalg.norm(np.cross(_F, UP))
VIEW = np.eye(4)
VIEW[:3, :3] = np.stack([_R, np.cross(_F, _R), _F])
VIEW[:3, 3] = -VIEW[:3, :3] @ np.array([0.0, -6.0, 2.5])


def _cube_points(n: int = 300, seed: int = 0) -> np.ndarray:
    """Points on the camera-facing half of a 0.8 m cube, off-centre like a monocular fit."""
    p = np.random.default_rng(seed).uniform(-0.4, 0.4, (n, 3))
    p[np.arange(n), np.arange(n) % 3] = 0.4 * np.sign(np.arange(n) % 2 - 0.5)
    return p[p[:, 1] < 0.1]


def _scene(centres: np.ndarray, yaws: np.ndarray) -> SceneTracks:
    """Tracks of one rigid cube moving through ``centres`` with headings ``yaws`` (radians)."""
    body = _cube_points()
    rot = [np.array([[math.cos(a), -math.sin(a), 0], [math.sin(a), math.cos(a), 0], [0, 0, 1]]) for a in yaws]
    pts = np.stack([body @ r.T + c for r, c in zip(rot, centres)])
    obj = ObjectInstance(1, np.arange(len(body)), colour="red", label="the red object")
    T = len(centres)
    track = track_object(obj, pts, np.ones(len(body)), 0, np.repeat(VIEW[None], T, 0), UP)
    return SceneTracks([track], UP, "test", np.repeat(VIEW[None], T, 0), None, "", "test")


def _ask(st: SceneTracks, question: str, choices: list) -> str | int:
    return answer_question({"question": question, "choices": dict(zip("ABCD", choices))}, st).answer


def test_spin_in_place_is_not_motion_and_has_the_right_sense():
    T = 24
    still = np.zeros((T, 3)) + [0.3, 0.0, 0.4]
    for sense, yaw in (("counter-clockwise", 1.0), ("clockwise", -1.0)):
        st = _scene(still, yaw * np.linspace(0, math.pi, T))
        assert not st.tracks[0].motion.moving, st.tracks[0].motion.path
        assert _ask(st, "Is the red cube rotating clockwise or counter-clockwise?",
                    ["clockwise", "counter-clockwise", "not rotating", "no red cube there"]) == sense
        assert _ask(st, "How many objects are spinning in place?", [0, 1, 2, 3]) == 1


def test_turning_object_moves_and_turns_the_right_way():
    T, r = 24, 1.2
    a = np.linspace(0, math.pi / 2, T)
    for sign, word in ((1.0, "left"), (-1.0, "right")):
        centres = np.stack([r * np.sin(a), sign * r * (1 - np.cos(a)), np.full(T, 0.4)], 1)
        st = _scene(centres, sign * a)
        assert st.tracks[0].motion.moving
        assert _ask(st, "Is the red cube turning to the left or right from its own perspective?",
                    ["left", "right", "moving straight and not turning", "no red cube there"]) == word
        assert _ask(st, "Is the red cube moving forwards or backwards from its own perspective?",
                    ["forwards", "backwards", "not moving", "no red cube there"]) == "forwards"


def test_translation_directions_and_absent_objects():
    T = 24
    t = np.linspace(0, 1, T)[:, None]
    st = _scene(np.array([0.9, 0.0, 0.4]) - t * [1.8, 0.0, 0.0], np.zeros(T))
    choices = ["left", "right", "not moving", "no red cube there"]
    assert _ask(st, "From the camera perspective, what direction is the red cube moving towards?", choices) == "left"
    assert _ask(st, "How many objects are moving to the left from the camera perspective?", [0, 1, 2, 3]) == 1
    for absent in ("blue cube", "green cone"):
        q = f"Is the {absent} coming closer or moving further away?"
        assert _ask(st, q, ["coming closer", "going further away", "not moving", f"no {absent} there"]) == f"no {absent} there"
    st = _scene(np.array([0.0, 1.0, 0.4]) - t * [0.0, 1.8, 0.0], np.zeros(T))
    assert _ask(st, "Is the red cube coming closer or moving further away?",
                ["coming closer", "going further away", "not moving", "no red cube there"]) == "coming closer"
    assert _ask(st, "What direction is the red cube moving towards?", ["left", "towards", "right", "away"]) == "towards"
    assert _ask(st, "From the camera perspective, what direction is the red cube moving towards?", choices) == CANNOT_TELL


def test_unsupported_questions_say_cannot_tell():
    st = _scene(np.zeros((4, 3)), np.zeros(4))
    assert parse("How many times does the horse jump to the right?")[0] == "unsupported"
    assert _ask(st, "How many times does the horse jump to the right?", [1, 2, 0, 4]) == CANNOT_TELL
    assert _ask(st, "How many cubes are there in the video?", [0, 1, 2, 3]) == CANNOT_TELL  # no shapes
    assert colour_word(np.array([0.1, 0.2, 0.8])) == "blue" and colour_word(np.array([0.5, 0.5, 0.5])) == "grey"


@pytest.fixture(scope="session")
def fitted_right_scene(tmp_path_factory):
    """The mirror of ``fitted_left_scene``: same seed and layout draws, the object moves right."""
    from tests.fitted import fitted_scene, synth_scene

    root = tmp_path_factory.mktemp("fitted_right")
    synth = synth_scene(root / "synth", "--motion", "right", "--seed", "1")
    return synth, fitted_scene(synth, root / "fit")


def test_answerer_on_fitted_direction_pair(fitted_left_scene, fitted_right_scene, tmp_path, capsys):
    from recon4d.commands import answer as answer_command
    from recon4d.grounding import describe_scene

    results = {}
    for (synth, scene), side in ((fitted_left_scene, "left"), (fitted_right_scene, "right")):
        out = tmp_path / f"{side}.jsonl"
        assert answer_command.main(["--scene", str(scene), "--qa", str(synth / "qa.json"), "--out", str(out)]) == 0
        last = capsys.readouterr().out.strip().splitlines()[-1]
        assert last.startswith("accuracy=")
        records = [json.loads(line) for line in out.read_text().splitlines()]
        truth = json.loads((synth / "qa.json").read_text())
        assert [r["id"] for r in records] == [e["id"] for e in truth]
        results[side] = {r["question"]: r["correct"] for r in records}
        # shape-counting is declined (the fit gives no reliable shape); everything else must be right
        declined = [r for r in records if r["letter"] is None]
        assert all(r["kind"] == "count_shape" for r in declined), declined
        answered = [r for r in records if r["letter"] is not None]
        assert sum(r["correct"] for r in answered) >= 0.95 * len(answered), answered
        assert f"moves {side}" in describe_scene(scene)
    shared = [q for q in set(results["left"]) & set(results["right"]) if not q.startswith("How many") or "moving" in q]
    both = [results["left"][q] and results["right"][q] for q in shared]
    assert sum(both) >= 0.9 * len(both)
