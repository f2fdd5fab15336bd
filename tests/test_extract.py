"""Answer extraction: one hand-written response per format, then agreement with VLM4D's judges on real outputs."""

from __future__ import annotations

import json

import pytest

from recon4d.commands import vqa
from vqa_bridge.extract import NO_ANSWER, extract_answer
from vqa_bridge.judged import JudgedFileError, judged_files, load_judged, reference_letter, score_file
from vqa_bridge.prompts import build_prompt, optionized_str

from .conftest import shared_data

DIRECTION = {"A": "left", "B": "not moving", "C": "no robot there", "D": "right"}
CAMERA = {"A": "towards the camera", "B": "away from the camera", "C": "not moving", "D": "no drone there"}
ROTATION = {"A": "clockwise", "B": "anticlockwise", "C": "not rotating", "D": "no fan there"}
COMPOUND = {"A": "not moving", "B": "no car there", "C": "left and away from the camera", "D": "right and towards the camera"}


@pytest.mark.parametrize(
    "response, choices, letter",
    [
        # Bare letters and letter + text, as direct-output prompts get.
        ("B", DIRECTION, "B"),
        (" D.", DIRECTION, "D"),
        ("(C) no robot there", DIRECTION, "C"),
        ("Answer: C.", DIRECTION, "C"),
        ("A: left", DIRECTION, "A"),
        ("B\nThe robot stays where it is in every frame.", DIRECTION, "B"),
        # The requested CoT format, with the wrappers models add.
        ("It moves across the frame.\n\nTherefore, the final answer is: D", DIRECTION, "D"),
        ("Therefore, the final answer is: **B**", DIRECTION, "B"),
        ("Therefore, the final answer is: $\\boxed{A}$", DIRECTION, "A"),
        ("Hence, the final answer is: 'D'.", DIRECTION, "D"),
        ("The final answer is: b.", DIRECTION, "B"),
        ("Therefore, the final answer is: B (left)", DIRECTION, "B"),
        ("因此，最终答案是：D", DIRECTION, "D"),
        # A letter outranks option text; the last final answer outranks an opening echo.
        ("Answer: A. The final answer is: right.", DIRECTION, "A"),
        ("A: right\n\nLooking again at the frames, nothing moves.\n\nTherefore, the final answer is: B", DIRECTION, "B"),
        # Option text instead of a letter, with spelling variants and paraphrases.
        ("Therefore, the final answer is: not moving.", DIRECTION, "B"),
        ("The drone is flying toward the camera.", CAMERA, "A"),
        ("The drone gets closer to the camera in every frame.", CAMERA, "A"),
        ("The blade spins counter-clockwise.", ROTATION, "B"),
        ("The car travels from left to right across the frame.", DIRECTION, "D"),
        ("The robot is stationary. It is just standing there.", DIRECTION, "B"),
        ("The car is driving towards the camera and to the right.", COMPOUND, "D"),
        ("There is no robot in the image.", DIRECTION, "C"),
        ("I don't see a robot anywhere, so it is not moving in any direction.", DIRECTION, "C"),
        # Negations: a rejected option is not a choice.
        ("It is clearly not moving left. The robot moves right.", DIRECTION, "D"),
        ("The final answer is not A, B, C, or D.", DIRECTION, NO_ANSWER),
        # Hedges, placeholders and case analyses choose nothing.
        ("Therefore, the final answer is: B or D.", DIRECTION, NO_ANSWER),
        ("C,D", DIRECTION, NO_ANSWER),
        ("Therefore, the final answer is: $LETTER", DIRECTION, NO_ANSWER),
        ("Therefore, the final answer is: N/A (not enough information)", DIRECTION, NO_ANSWER),
        ("Therefore, the final answer is: D if it moves right, otherwise A.", DIRECTION, NO_ANSWER),
        ("If it moves left:\nThe final answer is: A\n\nIf it moves right:\nThe final answer is: D", DIRECTION, NO_ANSWER),
        ("Without more context I cannot determine the direction.", DIRECTION, NO_ANSWER),
        # An 'if' before a single committed answer is still an answer.
        ("If we assume it keeps its heading, the answer would be:\n\nTherefore, the final answer is: D", DIRECTION, "D"),
        # An empty final phrase defers to the sentence before it.
        ("The robot drifts to the left.\nTherefore, the final answer is:", DIRECTION, "A"),
        # The article 'A' is not option A; a truncated ramble has no conclusion.
        ("A robot is visible in the frame, and it does not move at all.", DIRECTION, "B"),
        ("I look at each frame.\nThe robot leans towards the left in frame 3, then the image 5 shows 机器人向", DIRECTION, NO_ANSWER),
        ("", DIRECTION, NO_ANSWER),
    ],
)
def test_formats(response, choices, letter):
    assert extract_answer(response, choices) == letter


def test_integer_options():
    assert extract_answer("Therefore, the final answer is: 3", {"A": 1, "B": 2, "C": 3, "D": 4}) == "C"


def test_reference_letter():
    choices = {"A": "left", "B": "not moving", "C": "right", "D": "no cat there"}
    assert reference_letter("C: not moving", choices) == "C"  # the judges' letter counts, not their text
    assert reference_letter("No Valid Answer", choices) == NO_ANSWER
    assert reference_letter("not moving", choices) == "B"
    assert reference_letter("The cat walks towards the camera.", choices) == NO_ANSWER


def test_prompts_are_verbatim():
    choices = {"B": "right", "A": "left"}
    assert optionized_str(choices) == "A: left\nB: right"
    cot = build_prompt("Which way?", choices, "cot")
    assert cot.startswith("\nQuestion: Which way?\nA: left\nB: right\n\nAnswer the given multiple-choice question")
    assert "'Therefore, the final answer is: $LETTER' (without quotes), where $LETTER must be only one" in cot
    assert build_prompt("Which way?", choices, "do").endswith("Answer directly with the option letter from the given choices.\n")
    with pytest.raises(ValueError):
        build_prompt("Which way?", choices, "verbose")


def _write(folder, name, entries):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(entries))
    return folder / name


def test_extract_eval_command(tmp_path, capsys):
    entry = {"id": "q1", "choices": DIRECTION, "response": "Therefore, the final answer is: D", "extracted_answer": "D: right"}
    wrong = dict(entry, id="q2", extracted_answer="A: left")
    _write(tmp_path / "judged_toy_cot", "toy-model_8frame.json", [entry, wrong])
    assert vqa.main(["extract-eval", "--judged", str(tmp_path / "judged_toy_cot")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["toy-model_8frame", "cot", "2", "0.5000"]
    assert out[-1] == "agreement=0.500000"


def test_extract_eval_errors_name_the_problem(tmp_path, capsys):
    assert vqa.main(["extract-eval", "--judged", str(tmp_path / "absent")]) == 2
    assert "absent" in capsys.readouterr().err
    bad = _write(tmp_path / "judged_bad_do", "broken.json", [{"id": "q1", "response": "B"}])
    with pytest.raises(JudgedFileError, match="broken.json.*choices"):
        load_judged(bad)
    assert vqa.main(["extract-eval", "--judged", str(bad.parent)]) == 2
    assert "broken.json" in capsys.readouterr().err
    (bad.parent / "broken.json").write_text("{not json")
    assert vqa.main(["extract-eval", "--judged", str(bad.parent)]) == 2
    assert "broken.json" in capsys.readouterr().err


@pytest.mark.parametrize("step,option", [("run", "--qa"), ("extract", "--scene")])
def test_other_steps_name_their_missing_arguments(step, option, capsys):
    with pytest.raises(SystemExit) as exit_info:
        vqa.main([step])
    assert exit_info.value.code == 2
    assert option in capsys.readouterr().err


def test_agreement_with_vlm4d_judges():
    """The bar: >= 99% of all published entries, >= 97% for every model file."""
    folders = [shared_data("vlm4d", "judged_synthetic_cot"), shared_data("vlm4d", "judged_synthetic_do")]
    scores = [score_file(path, extract_answer) for path in judged_files(folders)]
    assert len(scores) >= 45
    overall = sum(s.agree for s in scores) / sum(s.n for s in scores)
    worst = min(scores, key=lambda s: s.fraction)
    assert overall >= 0.99, overall
    assert worst.fraction >= 0.97, (worst.mode, worst.model, worst.fraction)
