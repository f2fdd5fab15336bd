"""Real VLM4D wording parsed: coverage of the 795 real DAVIS questions (read from ../shared/data, skipped
without it) and the kind and parts of each wording VLM4D uses."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from recon4d.grounding.questions import parse
from tests.conftest import shared_data


def _real_questions() -> list[dict]:
    return json.loads(shared_data("vlm4d", "vlm4d_real_mc_davis.json").read_text())


def test_parse_covers_nine_tenths_of_the_real_davis_questions():
    questions = _real_questions()
    kinds = Counter(parse(e["question"])[0] for e in questions)
    assert len(questions) == 795
    assert 1 - kinds["unsupported"] / len(questions) >= 0.90, kinds
    sequences = {p.name for p in shared_data("davis").iterdir() if p.is_dir()}
    dev = [e for e in questions if e["video"].rsplit("/", 1)[-1].removesuffix(".mp4") in sequences]
    assert len(dev) == 102
    assert sum(parse(e["question"])[0] != "unsupported" for e in dev) >= 0.90 * len(dev)


@pytest.mark.parametrize("question, kind, parts", [
    ("Is the car moving closer or further away?", "distance", {"a": "car"}),
    ("Is the person moving towards or away from the camera?", "distance", {"a": "person"}),
    ("Is the helicopter landing or taking off?", "vertical", {"a": "helicopter"}),
    ("How many camels are walking to the left?", "count_direction", {"a": "camels", "label": "left"}),
    ("How many flamingos are standing still?", "count_still", {"a": "flamingos"}),
    ("Which way is the bike turning from its own perspective?", "own_turn", {"a": "bike", "frame": "own"}),
    ("From the cars perspective, is it turning to the left or right?", "own_turn", {"a": "cars"}),
    ("From the camera perspective, is the car turning to the left or right?", "seen_turn", {"frame": "camera"}),
    ("What direction is the person moving towards at the start of the video?", "direction", {"window": "start"}),
    ("What direction did the ball come from?", "origin", {"a": "ball"}),
    ("How many times does the horse jump to the right?", "count_jumps", {"a": "horse", "label": "right"}),
    ("How many full revolutions does the dancer spin clockwise?", "count_revolutions", {"sense": "clockwise"}),
    ("How many times does the dancer spin clockwise?", "count_revolutions", {"sense": "clockwise", "counted": "spins"}),
    ("In which direction did the camera turn towards?", "camera_turn", {}),
    ("Is the camera rotating clockwise or counter-clockwise around the girl?", "camera_orbit", {"a": "girl"}),
    ("Did the person move the drone to the left or right direction?", "direction", {"a": "drone"}),
    ("How many times does the batter hit the ball to the left?", "count_moves", {"a": "ball", "label": "left"}),
    ("Which way is the dog spinning?", "rotation", {"a": "dog", "spin": True}),
    ("Is the car moving clockwise or counter-clockwise around the roundabout?", "rotation", {"a": "car", "spin": False}),
    ("What direction is the dog moving towards?", "direction", {"a": "dog"}),
    ("How many steps did the bird in the foreground take to the left?", "count_steps",
     {"a": "bird in the foreground", "label": "left"}),
    ("How many flips did the mascot do to the right?", "count_steps", {"a": "mascot", "label": "right"}),
    ("How many times does the boy somersault to the left?", "count_steps", {"a": "boy", "label": "left"}),
])
def test_real_wordings_parse_to_their_kind(question, kind, parts):
    got, found = parse(question)
    assert got == kind and parts.items() <= found.items(), (got, found)
