"""InternVideo2-Chat's real remote code, loaded offline through the project's adapter on a tiny checkpoint.

The checkpoint (tests/internvideo2_tiny.py) is built from ../shared/models/internvideo2-chat-8b
at test time; every test skips when that folder is absent. The hub is switched off and
sockets refuse to connect, so any look-up the code still made would fail the test.
"""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest
import torch

from tests.internvideo2_tiny import FRAMES, build_tiny_checkpoint, index_name, real_checkpoint, saved_weights
from vqa_bridge.prompts import build_prompt

QUESTION = build_prompt("Which way does the cube move?", {"A": "left", "B": "right", "C": "not moving"}, "do")


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """No hub, no sockets, the remote code's module cache in a temporary folder."""
    import huggingface_hub.constants
    import transformers.dynamic_module_utils

    def refuse(*args, **kwargs):
        raise OSError("network access attempted in an offline test")

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        mp.setattr(socket.socket, "connect", refuse)
        mp.setattr(transformers.dynamic_module_utils, "HF_MODULES_CACHE", str(tmp_path_factory.mktemp("modules")))
        yield


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, offline) -> Path:
    real_checkpoint()
    return build_tiny_checkpoint(tmp_path_factory.mktemp("internvideo2") / "tiny")


@pytest.fixture(scope="module")
def full(checkpoint):
    from vqa_bridge.adapters.internvideo2 import load_internvideo2

    adapter = load_internvideo2(str(checkpoint), device="cpu")
    adapter.threads = 2
    return adapter


def _frames(n: int, seed: int) -> torch.Tensor:
    return torch.rand(n, 40, 56, 3, generator=torch.Generator().manual_seed(seed))


def _layer(name: str) -> int | None:
    found = re.search(r"\.(?:blocks|layer|layers)\.(\d+)\.", name)
    return int(found.group(1)) if found else None


def test_tiny_checkpoint_holds_the_real_names_and_shards(checkpoint):
    """The tiny checkpoint is the real one cut at 2 layers per stack: same names, same shards."""
    real = json.loads((real_checkpoint() / "model.safetensors.index.json").read_text())["weight_map"]
    tiny = json.loads((checkpoint / "model.safetensors.index.json").read_text())["weight_map"]
    assert tiny == {k: v for k, v in real.items() if (_layer(k) is None or _layer(k) < 2)}


def test_loads_whole_with_every_weight_from_the_checkpoint(full, checkpoint):
    saved = saved_weights(checkpoint)
    state = full.model.state_dict()
    assert {index_name(k) for k in state} == set(saved)
    assert all(torch.equal(v, saved[index_name(k)]) for k, v in state.items())
    # The LoRA adapters are live (the checkpoint's lora_B are not zero), as in the real model.
    assert type(full.model.lm).__name__.startswith("PeftModel")
    assert full.model.lm.base_model.model.lm_head.lora_B.default.weight.abs().max() > 0
    assert full.model.qformer.bert.embeddings.word_embeddings.weight.shape[0] == 31  # 30 + the [DEC] token
    assert full.clip_frames == FRAMES and all(p.dtype == torch.float32 for p in full.model.parameters())


def test_vision_only_loads_the_encoder_alone(checkpoint, full):
    from vqa_bridge.adapters.internvideo2 import load_internvideo2

    vision = load_internvideo2(str(checkpoint), vision_only=True, device="cpu")
    assert next(vision.model.lm.parameters()).is_meta and next(vision.model.qformer.parameters()).is_meta
    frames = _frames(FRAMES, 5)
    tokens, reference = vision.extract_tokens(frames), full.extract_tokens(frames)
    assert tokens.grid.shape == (FRAMES, 16, 16, 1408) and tokens.cls.shape == (1408,)
    torch.testing.assert_close(tokens.grid, reference.grid, atol=0, rtol=0)
    torch.testing.assert_close(tokens.cls, reference.cls, atol=0, rtol=0)


def test_own_tokens_through_the_real_qformer_and_llm_match_the_pixel_path(full):
    frames = _frames(FRAMES, 0)
    tokens = full.extract_tokens(frames)
    pixel = full.logits_from_frames(frames, QUESTION)
    bridged = full.logits_from_tokens(tokens, QUESTION)
    err = (pixel - bridged).abs().max().item()
    print(f"internvideo2 (real code): max |logit difference| = {err:.3g} over {tuple(pixel.shape)}")
    assert err <= 1e-5
    other = full.logits_from_tokens(full.extract_tokens(_frames(FRAMES, 1)), QUESTION)
    assert (other - pixel).abs().max().item() > 1e-3  # the video drives the logits
    assert full.answer_from_frames(frames, QUESTION, 4) == full.answer_from_tokens(tokens, QUESTION, 4)


def test_inputs_are_what_the_models_own_chat_builds(full):
    """The ids, mask and video slots equal what ``chat()`` hands ``generate_caption`` for the same question."""
    captured = {}

    def capture(input_ids, attention_mask, video_idx=None, video=None, **kwargs):
        captured.update(ids=input_ids, mask=attention_mask, video_idx=video_idx, video=video)
        return torch.zeros(1, 1, dtype=torch.long)

    model = full.model
    video = full._video(_frames(FRAMES, 2))[0]
    model.generate_caption = capture
    try:
        model.chat(full.tokenizer, "", QUESTION, media_type="video", media_tensor=video, chat_history=[])
    finally:
        del model.generate_caption
    ids, mask, video_idx = full._inputs(QUESTION)
    assert ids.tolist() == captured["ids"].tolist()
    assert mask.tolist() == captured["mask"].tolist()
    assert video_idx.bool().tolist() == captured["video_idx"].tolist()
    assert int(video_idx.sum()) == 96  # 32 + 64 Q-Former queries
    text = full.tokenizer.decode(ids[0][video_idx[0] == 0])
    assert text.count("[INST]") == 2 and text.count("[/INST]") == 2 and "</Video>[/INST] [INST]" in text


def test_decoding_is_greedy_whatever_the_checkpoint_says(full):
    from vqa_bridge.adapters.internvideo2 import InternVideo2Adapter

    lm = full.model.lm.get_base_model()
    lm.generation_config.update(do_sample=True, temperature=0.7, top_p=0.9)  # a checkpoint that samples
    adapter = InternVideo2Adapter(full.model, full.tokenizer, clip_frames=FRAMES)
    assert adapter.overridden == {"do_sample": True, "temperature": 0.7, "top_p": 0.9}
    config = lm.generation_config
    assert config.do_sample is False and config.num_beams == 1 and config.temperature is None and config.top_p is None
    # generate_caption's own defaults sample (do_sample=True, top_p=0.9): the adapter overrides them per call.
    seen = {}
    generate = full.model.lm.generate

    def spy(*args, **kwargs):
        seen.update(kwargs)
        return generate(*args, **kwargs)

    full.model.lm.generate = spy
    try:
        tokens = adapter.extract_tokens(_frames(FRAMES, 4))
        answers = {adapter.answer_from_tokens(tokens, QUESTION, 3) for _ in range(2)}
    finally:
        del full.model.lm.generate
    assert len(answers) == 1
    assert seen["do_sample"] is False and seen["num_beams"] == 1 and seen["top_p"] is None
    assert seen["temperature"] is None
    settings = adapter.run_settings()
    assert settings["generate"]["do_sample"] is False and "top_p" not in settings["generate"]
    assert settings["checkpoint_generation_overridden"] == adapter.overridden


def test_every_tensor_follows_the_models_device(checkpoint):
    """On a (fake) GPU the whole path runs with the model and every input on CUDA, in bf16 by default."""
    from tests.fake_cuda import fake_cuda, is_fake_cuda
    from vqa_bridge.adapters.internvideo2 import load_internvideo2

    frames = _frames(FRAMES, 3)
    with fake_cuda():
        adapter = load_internvideo2(str(checkpoint))
        assert all(is_fake_cuda(p) for p in adapter.model.parameters())
        assert adapter.model.vision_encoder.patch_embed.proj.weight.dtype == torch.bfloat16
        tokens = adapter.extract_tokens(frames)  # DeviceMixError if any input stayed on the CPU
        assert is_fake_cuda(tokens.grid)
        adapter.logits_from_frames(frames, QUESTION)
        adapter.logits_from_tokens(tokens, QUESTION)
        assert isinstance(adapter.answer_from_tokens(tokens, QUESTION, 2), str)
        vision = load_internvideo2(str(checkpoint), vision_only=True)
        assert is_fake_cuda(vision.extract_tokens(frames).grid)


def test_teacher_tokens_come_from_feature4x_strided_clips_of_the_real_encoder(full):
    from vqa_bridge.teacher import extract_teacher

    frames = _frames(9, 6)  # clips of 4, s = 2: [0,2,4,6], [1,3,5,7], then Feature4X's clip ending at 8: [2,4,6,8]
    features, cls = extract_teacher(full, frames)
    clips = {c: full.extract_tokens(frames[list(c)]) for c in ((0, 2, 4, 6), (1, 3, 5, 7), (2, 4, 6, 8))}
    expected = {0: (0, 2, 4, 6), 1: (1, 3, 5, 7), 3: (1, 3, 5, 7), 5: (1, 3, 5, 7), 7: (1, 3, 5, 7)}
    expected.update({f: (2, 4, 6, 8) for f in (2, 4, 6, 8)})
    for frame, clip in expected.items():
        torch.testing.assert_close(features[frame], clips[clip].grid[clip.index(frame)], atol=0, rtol=0)
    torch.testing.assert_close(cls, torch.stack([t.cls for t in clips.values()]).mean(0))
