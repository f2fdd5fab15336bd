"""vqa_bridge: the feature-field entry point is the model's own computation, teacher files, modalities, VLM4D runs.

The key property: handing a VLM its own vision-encoder tokens through the bridge
gives the same logits as the ordinary pixel path, for the transformers-native
tiny Qwen2.5-VL and for the InternVideo2-Chat stand-in (Qwen2.5-VL and InternVL built from their real
configs: tests/test_hf_adapters.py). Everything runs offline.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from recon4d.commands import vqa as vqa_command
from tests.conftest import shared_data
from tests.internvideo2_standin import standin_adapter
from vqa_bridge.adapters.tiny import VISION_DIM, tiny_adapter
from vqa_bridge.modalities import SceneInputs, ShortVideoError, sample_indices
from vqa_bridge.prompts import build_prompt
from vqa_bridge.teacher import clip_plan, extract_teacher, strided_clips
from vqa_bridge.vlm4d import load_questions, scene_name

PROMPT = build_prompt("Which way does the cube move?", {"A": "left", "B": "right", "C": "not moving"}, "do")


@pytest.fixture(scope="module")
def tiny():
    return tiny_adapter()


@pytest.fixture(scope="module")
def standin():
    return standin_adapter(frames=4)


def _frames(n: int, seed: int, h: int = 40, w: int = 56) -> torch.Tensor:
    return torch.rand(n, h, w, 3, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("which", ["tiny", "standin"])
def test_own_encoder_tokens_through_bridge_match_pixel_path(which, request):
    adapter = request.getfixturevalue(which)
    frames = _frames(4, 0)
    tokens = adapter.extract_tokens(frames)
    assert tokens.grid.dim() == 4 and tokens.grid.shape[0] == 4  # [T, h, w, C]
    pixel = adapter.logits_from_frames(frames, PROMPT)
    bridged = adapter.logits_from_tokens(tokens, PROMPT)
    err = (pixel - bridged).abs().max().item()
    print(f"{which}: max |logit difference| = {err:.3g} over {tuple(pixel.shape)}")
    assert err <= 1e-5
    # The tokens really drive the answer: another clip's tokens change the logits.
    other = adapter.logits_from_tokens(adapter.extract_tokens(_frames(4, 1)), PROMPT)
    assert (other - pixel).abs().max().item() > 1e-3
    # And generation follows the same path: same text from pixels and from the tokens.
    assert adapter.answer_from_frames(frames, PROMPT, 4) == adapter.answer_from_tokens(tokens, PROMPT, 4)


def test_qwen_tokens_are_frame_major_per_temporal_slot(tiny):
    frames = _frames(3, 2)  # 40x56 -> the tiny processor's 32x64 -> 4x8 patches
    grid = tiny.extract_tokens(frames).grid
    assert grid.shape == (3, 4, 8, VISION_DIM)
    # Frames 0 and 1 fill one temporal slot and share its map; frame 2 is a slot with a copy of itself (the
    # processor's padding), so its map is that of frame 2 alone; a slot's map depends on both its frames.
    torch.testing.assert_close(grid[0], grid[1], atol=0, rtol=0)
    torch.testing.assert_close(tiny.extract_tokens(frames[2:]).grid[0], grid[2], atol=1e-5, rtol=0)
    assert (tiny.extract_tokens(frames[:1]).grid[0] - grid[0]).abs().max() > 1e-3
    # Spatial layout: a change confined to the left quarter of the image moves left-quarter tokens most.
    edited = frames.clone()
    edited[:, :, : frames.shape[2] // 4] = 0.0
    delta = (tiny.extract_tokens(edited).grid - grid).abs().mean(dim=(0, 1, 3))
    assert delta[: grid.shape[2] // 4].mean() > 3 * delta[grid.shape[2] // 2:].mean()


def test_internvideo2_tokens_keep_cls_and_restore_encoder(standin):
    encoder = standin.model.vision_encoder
    tokens = standin.extract_tokens(_frames(4, 3))
    assert tokens.grid.shape == (4, 4, 4, 24) and tokens.cls.shape == (24,)
    standin.logits_from_tokens(tokens, PROMPT)
    assert standin.model.vision_encoder is encoder
    with pytest.raises(ValueError, match="CLS"):
        standin.logits_from_tokens(type(tokens)(tokens.grid), PROMPT)


def test_strided_clips_are_feature4x_get_indices_split_plus_the_frames_it_misses():
    assert strided_clips(50, 8) == [[j + 6 * k for k in range(8)] for j in range(6)] + [[7, 13, 19, 25, 31, 37, 43, 49]]
    assert strided_clips(16, 8) == [[0, 2, 4, 6, 8, 10, 12, 14], [1, 3, 5, 7, 9, 11, 13, 15]]  # 15 covered: no extra
    assert strided_clips(8, 8) == [list(range(8))]
    assert strided_clips(10, 4) == [[0, 2, 4, 6], [1, 3, 5, 7], [3, 5, 7, 9]]
    assert strided_clips(3, 4) == [[0, 1, 2, 2]]  # shorter than a clip: the last frame repeated
    assert 48 not in set().union(*strided_clips(50, 8))  # Feature4X leaves frame 48 of 50 without tokens
    extra = [c for c in clip_plan(50, 8) if not c.cls]
    assert [(c.frames, c.stores) for c in extra] == [([6, 12, 18, 24, 30, 36, 42, 48], [48])]
    for n in (3, 8, 9, 23, 50, 81):  # every frame's tokens come from exactly one clip's slot (the last holding it)
        plan = clip_plan(n, 8)
        assert set().union(*(c.stores for c in plan)) == set(range(n))
        assert all(len(c.frames) == 8 and c.frames == sorted(c.frames) for c in plan)


def test_extract_teacher_uses_strided_clips_and_averages_cls(tiny, standin):
    frames = _frames(10, 4)
    features, cls = extract_teacher(tiny, frames)
    assert features.shape == (10, 4, 8, VISION_DIM) and features.dtype == torch.float32 and cls is None
    features, cls = extract_teacher(standin, frames)  # clips of 4: [0,2,4,6], [1,3,5,7], then [3,5,7,9]
    assert features.shape == (10, 4, 4, 24) and cls.shape == (24,)
    clips = [standin.extract_tokens(frames[c]) for c in ([0, 2, 4, 6], [1, 3, 5, 7], [3, 5, 7, 9])]
    torch.testing.assert_close(features[[0, 2, 4, 6]], clips[0].grid)
    torch.testing.assert_close(features[[1]], clips[1].grid[:1])
    torch.testing.assert_close(features[[3, 5, 7, 9]], clips[2].grid)  # the last clip holding a frame wins
    torch.testing.assert_close(features[8], standin.extract_tokens(frames[[2, 4, 6, 8]]).grid[3])  # missed: own clip
    torch.testing.assert_close(cls, torch.stack([c.cls for c in clips]).mean(0))
    # A video shorter than a clip: one clip with its last frame repeated, the padding dropped.
    short, short_cls = extract_teacher(standin, frames[:3])
    padded = standin.extract_tokens(frames[[0, 1, 2, 2]])
    torch.testing.assert_close(short, padded.grid[:3])
    torch.testing.assert_close(short_cls, padded.cls)


def _write_frames(folder: Path, n: int, seed: int = 0) -> None:
    (folder / "frames").mkdir(parents=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        cv2.imwrite(str(folder / "frames" / f"{i:05d}.jpg"), rng.integers(0, 255, (48, 64, 3), dtype=np.uint8))


def test_extract_command_writes_teacher_file(tmp_path):
    _write_frames(tmp_path / "scene", 5)
    assert vqa_command.main(["extract", "--scene", str(tmp_path / "scene"), "--model", "tiny"]) == 0
    stored = load_file(str(tmp_path / "scene" / "priors" / "teachers" / "tiny.safetensors"))
    assert set(stored) == {"features"}
    assert stored["features"].shape == (5, 6, 8, VISION_DIM) and stored["features"].dtype == torch.float32
    assert vqa_command.main(["extract", "--scene", str(tmp_path / "nothing"), "--model", "tiny"]) == 2
    assert vqa_command.main(["extract", "--scene", str(tmp_path / "scene"), "--model", "internvideo2"]) == 2


def test_frame_sampling_is_vlm4d_linspace():
    assert sample_indices(50, 8) == [0, 7, 14, 21, 28, 35, 42, 49]
    assert sample_indices(24, 8) == np.linspace(0, 23, 8).round().astype(int).tolist()
    assert sample_indices(8, 8) == list(range(8))
    with pytest.raises(ShortVideoError, match="5 frames, fewer than the 8"):
        sample_indices(5, 8)


def test_vlm4d_loader_maps_videos_and_names_bad_entries(tmp_path):
    assert scene_name("https://huggingface.co/datasets/shijiezhou/VLM4D/resolve/main/videos_real/davis/"
                      "horsejump-high.mp4") == "horsejump-high"
    assert scene_name("synth_s3/video.mp4") == "synth_s3"
    good = {"id": "q1", "video": "a/blackswan.mp4", "question": "How many?", "choices": {"A": 1, "B": 2},
            "answer": 2, "question_type": "multiple-choice"}
    entries = [good, {**good, "id": "q2", "choices": ["x"]}, {**good, "id": "q3", "answer": "seven"},
               {"video": "x.mp4"}, {**good}, "not an object"]
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(entries))
    questions, problems = load_questions(qa)
    assert [(q.id, q.scene, q.answer, q.choices["B"]) for q in questions] == [("q1", "blackswan", "B", "2")]
    assert [p.split(":")[0] for p in problems] == ["question q2", "question q3", "entry 3 (no id)",
                                                   "question q1", "entry 5 (no id)"]


def test_vlm4d_real_annotations_load():
    questions, problems = load_questions(shared_data("vlm4d", "vlm4d_real_mc_davis.json"))
    # One published question lists its correct option twice (C and D), so no single letter is right.
    assert len(questions) == 794
    assert problems == ["question validation_633: malformed, skipped: answer 'away from the camera' is more than "
                        "one of the choices"]
    assert sum(q.scene == "blackswan" for q in questions) == 5
    assert sum(q.scene == "horsejump-high" for q in questions) == 4


@pytest.fixture(scope="module")
def vqa_scene(fitted_left_scene, tmp_path_factory):
    """A copy of the shared fitted scene with the tiny teacher extracted and a head for it.

    Distilling a head is `recon4d fit`'s job (tested there); here an untrained head of
    the right shape is enough to exercise the feature-field path end to end.
    """
    from recon4d.scene.heads import FeatureHead
    from recon4d.scene.state import load_scene, save_scene

    synth, fitted = fitted_left_scene
    root = tmp_path_factory.mktemp("vqa_scenes")
    scene = root / fitted.name
    shutil.copytree(fitted, scene)
    assert vqa_command.main(["extract", "--scene", str(scene), "--model", "tiny"]) == 0
    model, heads, meta = load_scene(scene / "model")
    heads["tiny"] = FeatureHead(model.latent_dim, VISION_DIM)
    save_scene(scene / "model", model, heads, meta)
    return synth, root, scene


def test_modalities_build_from_fitted_scene(vqa_scene):
    _, _, scene = vqa_scene
    inputs = SceneInputs(scene, "tiny")
    times = sample_indices(inputs.frame_count(), 4)
    raw, glob = inputs.build("raw", times), inputs.build("global-video", times)
    assert raw.shape == glob.shape and raw.shape[0] == 4 and raw.shape[-1] == 3
    assert (raw - glob).abs().mean() > 0.02  # another camera sees another picture
    field = inputs.build("feature-field", times)
    assert field.grid.shape == (4, 6, 8, VISION_DIM) and field.cls is None
    assert inputs.build("raw", times) is raw  # built once per scene


def test_end_to_end_vlm4d_run_offline(vqa_scene, tmp_path, capsys):
    synth, scenes, scene = vqa_scene
    entries = json.loads((synth / "qa.json").read_text())[:5]
    good = {q["id"] for q in entries}
    _write_frames(scenes / "short_scene", 3)
    entries += [
        {**entries[0], "id": "bad_choices", "choices": "A or B"},
        {**entries[0], "id": "no_scene", "video": "elsewhere/missing_seq.mp4"},
        {**entries[0], "id": "too_short", "video": "short_scene/video.mp4"},
    ]
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(entries))
    (tmp_path / "gt").mkdir()
    shutil.copy(synth / "gt" / "questions.json", tmp_path / "gt" / "questions.json")
    out = tmp_path / "run"
    args = ["run", "--qa", str(qa), "--scenes", str(scenes), "--out", str(out), "--model", "tiny",
            "--modalities", "raw", "global-video", "feature-field", "--prompt", "cot", "do",
            "--max-new-tokens-cot", "8", "--max-new-tokens-do", "4"]
    assert vqa_command.main(args) == 0
    err = capsys.readouterr().err
    for qid, why in [("bad_choices", "malformed"), ("no_scene", "not found"), ("too_short", "fewer than the 8")]:
        assert any(qid in line and why in line for line in err.splitlines()), (qid, err)

    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == len(good) * 3 * 2
    assert {(r["id"], r["modality"], r["prompt_mode"]) for r in records} == {
        (q, m, p) for q in good for m in ("raw", "global-video", "feature-field") for p in ("cot", "do")}
    for r in records:
        assert isinstance(r["response"], str) and r["extracted"] in {"A", "B", "C", "D", "No Valid Answer"}
        assert r["correct"] == (r["extracted"] == r["answer"]) and r["frames"] == sample_indices(24, 8)
        assert r["question_type"] != "multiple-choice"  # finer kinds from the synth sidecar
    md = (out / "summary.md").read_text()
    rows = [line for line in (out / "summary.csv").read_text().splitlines()[1:] if ",all," in line]
    assert len(rows) == 6 and "| cot | feature-field | all |" in md and "| do | raw | all |" in md

    # Resumable: a second run answers nothing new and keeps the table.
    assert vqa_command.main(args) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == len(records)
    assert "answered 0, already done 30" in capsys.readouterr().out


def test_cues_and_geometric_modalities(vqa_scene, tmp_path):
    """``raw+cues`` asks the VLM with the fitted trajectories in the prompt; ``geometric`` records the geometric
    answerer's letters, which on this fitted scene (one object moving left) are the truth."""
    from recon4d.grounding import answer_file, describe_scene
    from vqa_bridge.prompts import CUES_HEADER, build_prompt, with_cues

    synth, scenes, scene = vqa_scene
    entries = json.loads((synth / "qa.json").read_text())
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps(entries))
    out = tmp_path / "run"
    args = ["run", "--qa", str(qa), "--scenes", str(scenes), "--out", str(out), "--model", "tiny",
            "--modalities", "raw+cues", "geometric", "--prompt", "cot", "do",
            "--max-new-tokens-cot", "8", "--max-new-tokens-do", "4"]
    assert vqa_command.main(args) == 0
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert {(r["id"], r["modality"], r["prompt_mode"]) for r in records} == {
        (e["id"], m, p) for e in entries for m in ("raw+cues", "geometric") for p in ("cot", "do")}

    cues = describe_scene(scene)
    assert "moves left" in cues
    prompt = with_cues(cues, build_prompt(entries[0]["question"], entries[0]["choices"], "do"))
    assert prompt.startswith(CUES_HEADER) and cues.strip() in prompt
    assert prompt.endswith(build_prompt(entries[0]["question"], entries[0]["choices"], "do"))

    letters = {r["id"]: r["letter"] for r in answer_file(scene, entries)[0]}
    geometric = [r for r in records if r["modality"] == "geometric"]
    assert all(r["extracted"] == letters[r["id"]] and r["correct"] == (r["extracted"] == r["answer"]) for r in geometric)
    assert sum(r["correct"] for r in geometric) >= 0.95 * len(geometric)
    assert "| geometric |" in (out / "summary.md").read_text()
