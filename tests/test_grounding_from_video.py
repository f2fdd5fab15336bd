"""The geometric answerer on a synth pair fitted from its video alone, not from exact priors.

The fast subset of ``scripts/grounding_eval.py --priors auto``: the seed-11 direction pair
(a yellow cube and a green ball, static camera), each scene fitted with the priors a user's
clip gets (camera solve, offline depth, motion masks) and answered with the scene's id
masks. A static camera gives the offline depth nothing to triangulate, so the depth prior
is constant and the camera's pitch unknown; what the image shows must still come out
right: each object's left/right travel and the pair's swap, the counts by direction,
objects that are not there, and the yellow cube (whose shape the silhouette test cannot
name without the pitch) is still the object the questions ask about.
"""

from __future__ import annotations

import json

import pytest

from recon4d.commands import answer as answer_command
from recon4d.commands import fit as fit_command
from recon4d.commands import synth as synth_command

# Question kinds whose answers the image alone decides (no depth, no shape needed).
SEEN_KINDS = ("camera_direction_lateral", "absent_camera_direction_lateral")


@pytest.fixture(scope="module")
def pair_answers(tmp_path_factory) -> dict[str, list[dict]]:
    """Per scene of the pair, its answer records, each with the question's kind from gt/questions.json."""
    root = tmp_path_factory.mktemp("from_video")
    args = ["--preset", "tiny", "--out", str(root / "synth"), "--seed", "11", "--objects", "2", "--pairs", "direction",
            "--no-novel"]
    assert synth_command.main(args) == 0
    out = {}
    for synth in sorted((root / "synth").glob("synth_s11_direction_*")):
        fit = ["--video", str(synth), "--out", str(root / "fit"), "--priors", "auto", "--preset", "test"]
        assert fit_command.main(fit) == 0
        answers = root / f"{synth.name}.jsonl"
        assert answer_command.main(["--scene", str(root / "fit" / synth.name), "--qa", str(synth / "qa.json"),
                                    "--out", str(answers)]) == 0
        kinds = {q["id"]: q["kind"] for q in json.loads((synth / "gt" / "questions.json").read_text())}
        records = [json.loads(line) for line in answers.read_text().splitlines()]
        out[synth.name.rsplit("_", 1)[1]] = [{**r, "kind": kinds[r["id"]]} for r in records]
    return out


def test_what_the_image_shows_is_answered_without_exact_priors(pair_answers):
    assert sorted(pair_answers) == ["left", "right"]
    for side, records in pair_answers.items():
        seen = [r for r in records if r["kind"] in SEEN_KINDS]
        assert len(seen) >= 3 and all(r["correct"] for r in seen), [(r["question"], r["answer"]) for r in seen]
        directional = [r for r in records if "moving to the" in r["question"] and r["kind"] == "count"]
        assert directional and all(r["correct"] for r in directional), side


def test_the_cube_is_found_though_its_shape_cannot_be_named(pair_answers):
    for records in pair_answers.values():
        cube = [r for r in records if "yellow cube" in r["question"]]
        assert cube and all(r["answer"] != "no yellow cube there" for r in cube)
        assert sum(r["correct"] for r in cube) >= len(cube) - 1, [(r["question"], r["answer"]) for r in cube]


def test_the_pair_swaps_its_moving_objects_direction(pair_answers):
    """The factor that differs between the two scenes is read the right way in each."""
    moved = {side: next(r["answer"] for r in records if r["kind"] == "camera_direction_lateral"
                        and "yellow cube" in r["question"]) for side, records in pair_answers.items()}
    assert moved == {"left": "left", "right": "right"}
