"""Qwen2.5-VL and InternVL adapters on tiny models built from the real configs (tests/hf_models.py), offline.

What is checked: the adapters feed the model exactly what the checkpoint's
processor and chat template produce for the same frames and question (ids,
pixels, grids, slot timing); the model's own encoder tokens handed back through
the bridge give the pixel path's logits; decoding is greedy whatever the
checkpoint's generation config says, and results record what was overridden;
every tensor the adapters hand the model is on the model's device.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import Tensor

from tests.hf_models import tiny_internvl3, tiny_qwen2_5_vl
from vqa_bridge.adapters.base import VisionTokens
from vqa_bridge.adapters.hf_native import placement
from vqa_bridge.adapters.internvl import InternVLAdapter
from vqa_bridge.adapters.qwen import QwenVLAdapter
from vqa_bridge.prompts import build_prompt

PROMPT = build_prompt("Which way does the cube move?", {"A": "left", "B": "right", "C": "not moving"}, "do")


def _adapter(cls, build):
    adapter = cls(*build())
    adapter.threads = 1
    return adapter


@pytest.fixture(scope="module")
def qwen():
    return _adapter(QwenVLAdapter, tiny_qwen2_5_vl)


@pytest.fixture(scope="module")
def internvl():
    return _adapter(InternVLAdapter, tiny_internvl3)


def _video(n: int, seed: int, h: int = 40, w: int = 56) -> np.ndarray:
    """A decoded 8-bit video [n,H,W,3], as the processor is normally given one."""
    return np.random.default_rng(seed).integers(0, 256, (n, h, w, 3), dtype=np.uint8)


def _floats(video: np.ndarray) -> Tensor:
    return torch.from_numpy(video).float() / 255.0


def _reference(processor, video: np.ndarray, **video_kwargs) -> dict:
    """The processor used as its model card uses it: chat template on a video + question turn, then one call."""
    messages = [{"role": "user", "content": [{"type": "video"}, {"type": "text", "text": PROMPT}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return dict(processor(text=[text], videos=[video], return_tensors="pt", **video_kwargs))


def _assert_same(ours: dict, theirs: dict, keys) -> None:
    for key in keys:
        torch.testing.assert_close(ours[key], theirs[key], atol=0, rtol=0, msg=key)


# -- the models' own inputs ----------------------------------------------------------------------------

@pytest.mark.parametrize("frames,fps", [(4, 2.0), (3, 4.0)])
def test_qwen_inputs_are_the_processors(qwen, frames, fps, monkeypatch):
    monkeypatch.setattr(qwen, "fps", fps)
    video = _video(frames, 0)
    metadata = [{"total_num_frames": frames, "fps": fps, "frames_indices": list(range(frames))}]
    theirs = _reference(qwen.processor, video, video_metadata=metadata)
    ours = qwen.frame_inputs(_floats(video), PROMPT)
    keys = ("input_ids", "attention_mask", "mm_token_type_ids", "pixel_values_videos", "video_grid_thw",
            "second_per_grid_ts")
    _assert_same(ours, theirs, keys)
    # Two frames a temporal slot (a 3-frame clip padded with its last frame); 40x56 frames grow to the video
    # processor's minimum of 128 merged tokens a frame (280x392 px: 20x28 patches of 14, 140 tokens); the
    # slots are 2 / fps seconds apart.
    assert ours["video_grid_thw"].tolist() == [[2, 20, 28]]
    assert ours["second_per_grid_ts"].tolist() == [2 / fps]
    ids = ours["input_ids"][0]
    assert int((ids == qwen.model.config.video_token_id).sum()) == 2 * 20 * 28 // 4
    assert qwen.tokenizer.decode(ids).startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                                                 "<|im_start|>user\n<|vision_start|><|video_pad|>")
    # The feature-field path asks for the same sequence, grid and timing without pixels.
    tokens = qwen.token_inputs(qwen.extract_tokens(_floats(video)), PROMPT)
    _assert_same(tokens, theirs, ("input_ids", "attention_mask", "mm_token_type_ids", "video_grid_thw",
                                  "second_per_grid_ts"))


def test_internvl_inputs_are_the_processors(internvl):
    video = _video(4, 1)
    theirs = _reference(internvl.processor, video)
    ours = internvl.frame_inputs(_floats(video), PROMPT)
    _assert_same(ours, theirs, ("input_ids", "attention_mask", "pixel_values"))
    # One 448 px image per frame (no tiling), ImageNet-normalised, 256 context tokens between <img> and </img>.
    assert ours["pixel_values"].shape == (4, 3, 448, 448)
    text = internvl.tokenizer.decode(ours["input_ids"][0])
    for i in range(1, 5):
        assert f"Frame{i}: <img>" + "<IMG_CONTEXT>" * 256 + "</img>" in text
    assert int((ours["input_ids"] == 151667).sum()) == 4 * 256
    tokens = internvl.token_inputs(internvl.extract_tokens(_floats(video)), PROMPT)
    _assert_same(tokens, theirs, ("input_ids", "attention_mask"))


def test_a_loaded_checkpoint_keeps_its_processor(tmp_path):
    """save_pretrained -> load_qwen2_5_vl: same model inputs, float32 on CPU by default."""
    from vqa_bridge.adapters.qwen import load_qwen2_5_vl

    model, processor = tiny_qwen2_5_vl()
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    loaded = load_qwen2_5_vl(str(tmp_path), device="cpu")
    assert loaded.device == torch.device("cpu") and loaded.model.dtype == torch.float32
    frames = _floats(_video(4, 2))
    _assert_same(loaded.frame_inputs(frames, PROMPT), QwenVLAdapter(model, processor).frame_inputs(frames, PROMPT),
                 ("input_ids", "pixel_values_videos", "video_grid_thw", "second_per_grid_ts"))


# -- the feature-field entry point ---------------------------------------------------------------------

@pytest.mark.parametrize("which,frames,fps", [("qwen", 4, 2.0), ("qwen", 3, 4.0), ("internvl", 4, None)])
def test_own_encoder_tokens_through_bridge_match_pixel_path(which, frames, fps, request, monkeypatch):
    adapter = request.getfixturevalue(which)
    if fps is not None:
        monkeypatch.setattr(adapter, "fps", fps)
    clip = _floats(_video(frames, 3))
    tokens = adapter.extract_tokens(clip)
    assert tokens.grid.dim() == 4 and tokens.grid.shape[0] == frames  # one [h, w, C] map per frame
    pixel = adapter.logits_from_frames(clip, PROMPT)
    bridged = adapter.logits_from_tokens(tokens, PROMPT)
    assert (pixel - bridged).abs().max().item() <= 1e-5
    other = adapter.logits_from_tokens(adapter.extract_tokens(_floats(_video(frames, 4))), PROMPT)
    assert (other - pixel).abs().max().item() > 1e-3  # the tokens drive the answer
    assert adapter.answer_from_frames(clip, PROMPT, 3) == adapter.answer_from_tokens(tokens, PROMPT, 3)


def test_qwen_slot_maps_pair_frames_and_field_maps_are_averaged(qwen):
    clip = _floats(_video(4, 5))
    grid = qwen.extract_tokens(clip).grid
    assert grid.shape == (4, 20, 28, 32)
    torch.testing.assert_close(grid[0], grid[1], atol=0, rtol=0)  # one slot, one map
    assert (grid[1] - grid[2]).abs().max() > 1e-3
    # A field renders a map per frame, different within a slot: the slot gets their mean.
    field = grid + torch.randn(grid.shape, generator=torch.Generator().manual_seed(0))
    paired = torch.stack([field[0::2], field[1::2]]).mean(0).repeat_interleave(2, dim=0)
    torch.testing.assert_close(qwen.logits_from_tokens(VisionTokens(field), PROMPT),
                               qwen.logits_from_tokens(VisionTokens(paired), PROMPT), atol=1e-5, rtol=0)


def test_bf16_model_keeps_the_equivalence():
    adapter = _adapter(QwenVLAdapter, tiny_qwen2_5_vl)
    adapter.model.to(torch.bfloat16)
    clip = _floats(_video(2, 6))
    tokens = adapter.extract_tokens(clip)
    assert tokens.grid.dtype == torch.float32  # stored as float32, exactly the bf16 values
    assert (adapter.logits_from_frames(clip, PROMPT) - adapter.logits_from_tokens(tokens, PROMPT)).abs().max() == 0


# -- greedy decoding -----------------------------------------------------------------------------------

def test_decoding_is_greedy_and_recorded(qwen):
    config = qwen.model.generation_config
    assert config.do_sample is False and config.num_beams == 1
    assert (config.temperature, config.top_p, config.top_k, config.repetition_penalty) == (None,) * 4
    assert qwen.run_settings()["checkpoint_generation_overridden"] == {
        "do_sample": True, "temperature": 0.1, "top_p": 0.001, "top_k": 1, "repetition_penalty": 1.05}
    # generate() picks the argmax of the model's own logits at every step (no penalty, no sampling).
    clip = _floats(_video(2, 7))
    inputs = qwen.frame_inputs(clip, PROMPT)
    steps = []
    with torch.no_grad():
        for _ in range(4):
            qwen.model.model.rope_deltas = None
            steps.append(int(qwen.model(**inputs).logits[0, -1].argmax()))
            one = torch.ones(1, 1, dtype=torch.long)
            inputs = {**inputs, "input_ids": torch.cat([inputs["input_ids"], one * steps[-1]], 1),
                      "attention_mask": torch.cat([inputs["attention_mask"], one], 1),
                      "mm_token_type_ids": torch.cat([inputs["mm_token_type_ids"], one * 0], 1)}
    assert qwen.answer_from_frames(clip, PROMPT, 4) == qwen.tokenizer.decode(steps, skip_special_tokens=True)


def test_results_record_the_model_settings(qwen, tmp_path):
    import cv2

    from vqa_bridge.evaluate import run_vlm4d

    (tmp_path / "scenes" / "clip" / "frames").mkdir(parents=True)
    for i, frame in enumerate(_video(4, 8)):
        cv2.imwrite(str(tmp_path / "scenes" / "clip" / "frames" / f"{i:05d}.png"), frame)
    qa = tmp_path / "qa.json"
    qa.write_text(json.dumps([{"id": "q1", "video": "x/clip.mp4", "question": "Which way?",
                               "choices": {"A": "left", "B": "right"}, "answer": "left",
                               "question_type": "multiple-choice"}]))
    run_vlm4d(qa, tmp_path / "scenes", tmp_path / "out", qwen, "qwen2.5-vl", ["raw"], ["do"], n_frames=4,
              log=lambda _: None)
    (record,) = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    settings = record["generation"]["model_settings"]
    assert settings["generate"] == {"do_sample": False, "num_beams": 1} and settings["video_fps"] == 2.0
    assert settings["checkpoint_generation_overridden"]["temperature"] == 0.1
    assert '"checkpoint_generation_overridden"' in (tmp_path / "out" / "summary.md").read_text()


# -- device and dtype ----------------------------------------------------------------------------------

def test_placement_defaults():
    assert placement("cpu") == (torch.device("cpu"), torch.float32)
    assert placement("cuda:1") == (torch.device("cuda:1"), torch.bfloat16)
    assert placement("cuda", torch.float16)[1] == torch.float16


class _Stop(Exception):
    """Raised by a recorder once the model has been called: nothing on ``meta`` can really run."""


def _tensors(value):
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors(v)


@pytest.mark.parametrize("build", [lambda: QwenVLAdapter(*tiny_qwen2_5_vl()),
                                   lambda: InternVLAdapter(*tiny_internvl3())], ids=["qwen", "internvl"])
def test_every_input_follows_the_models_device(build, monkeypatch):
    """The model on ``meta``: every tensor that reaches it (or its encoder, merger, projector) must be there too."""
    adapter = build()
    adapter.model.to("meta")
    seen: list[tuple[str, torch.device]] = []

    def recorder(name, then=None):
        def record(*args, **kwargs):
            seen.extend((name, t.device) for t in _tensors([args, kwargs]))
            if then is None:
                raise _Stop
            return then(*args, **kwargs)

        return record

    inner = adapter.model.model
    encoder, merger = (inner.visual, inner.visual.merger) if isinstance(adapter, QwenVLAdapter) else (
        inner.vision_tower, inner.multi_modal_projector)
    monkeypatch.setattr(encoder, "forward", recorder("encoder"))
    monkeypatch.setattr(merger, "forward", recorder("merger", then=merger.forward))  # runs on: its output is used
    monkeypatch.setattr(adapter.model, "forward", recorder("forward"))
    monkeypatch.setattr(adapter.model, "generate", recorder("generate"))
    clip = _floats(_video(2, 9))
    side = (20, 28) if isinstance(adapter, QwenVLAdapter) else (32, 32)
    tokens = VisionTokens(torch.zeros(2, *side, 32))  # on the CPU, as the feature field hands them over
    calls = [lambda: adapter.extract_tokens(clip), lambda: adapter.logits_from_frames(clip, PROMPT),
             lambda: adapter.logits_from_tokens(tokens, PROMPT), lambda: adapter.answer_from_frames(clip, PROMPT, 2),
             lambda: adapter.answer_from_tokens(tokens, PROMPT, 2)]
    for call in calls:
        with pytest.raises(_Stop):
            call()
    assert {name for name, _ in seen} == {"encoder", "merger", "forward", "generate"}
    assert len(seen) > 10 and all(device.type == "meta" for _, device in seen), seen
