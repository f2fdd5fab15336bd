"""A tiny random-weight Qwen2.5-VL that runs offline in seconds, for tests, demos and ablations.

Why this model: it is the real ``transformers`` class (so everything the bridge
does to it is what it would do to the 7B checkpoint), built from a config with a
fixed seed, so nothing is downloaded and every run gives the same answers.

Why this tokenizer: no pretrained tokenizer ships inside the packages installed
here, and the hub is not reachable at run time. A byte-level tokenizer built
with ``tokenizers`` (256 byte symbols, no merges, plus Qwen's chat and vision
special tokens) encodes any text losslessly and needs no files, which is all a
random-weight model needs. Its answers are noise, but noise with the exact
shape of a real run: the extractor usually finds no valid answer in them.

Why a processor: the adapter builds every input through the model's processor
and chat template, as it does for the 7B checkpoint; this one has Qwen's
processor classes at the tiny model's patch size and a small pixel budget, and a
chat template with Qwen2.5-VL's layout (the byte tokenizer ships none).
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import (PreTrainedTokenizerFast, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration,
                          Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor)

from vqa_bridge.adapters.hf_native import placement
from vqa_bridge.adapters.qwen import QwenVLAdapter

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
                  "<|image_pad|>", "<|video_pad|>"]

# Patches of 8 px, merged 2x2; the video processor keeps a frame between 32^2 and 64^2 pixels (aspect kept,
# sides multiples of 16): a 48x64 frame stays 48x64, a 6x8 teacher grid of width VISION_DIM.
PATCH = 8
MIN_PIXELS, MAX_PIXELS = 32 * 32, 64 * 64
VISION_DIM = 32

# Qwen2.5-VL's chat layout: the default system prompt, then each turn; a video is
# <|vision_start|><|video_pad|><|vision_end|>, which the processor expands to the video's tokens.
CHAT_TEMPLATE = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'video' %}<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif c['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level tokenizer (one id per byte symbol, 256 in all) with Qwen's special tokens after them."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.add_special_tokens({"additional_special_tokens": SPECIAL_TOKENS[1:]})
    return tok


def tiny_qwen_config(tokenizer: PreTrainedTokenizerFast) -> Qwen2_5_VLConfig:
    """Two vision blocks (one windowed, one full attention) and two text layers, a few thousand weights each."""
    ids = tokenizer.convert_tokens_to_ids
    vision = dict(depth=2, hidden_size=VISION_DIM, intermediate_size=64, num_heads=2, patch_size=PATCH,
                  spatial_merge_size=2, temporal_patch_size=2, window_size=32, out_hidden_size=64,
                  fullatt_block_indexes=[1], tokens_per_second=2)
    text = dict(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
                bos_token_id=ids("<|endoftext|>"), eos_token_id=ids("<|im_end|>"),
                pad_token_id=ids("<|endoftext|>"))
    return Qwen2_5_VLConfig(vision_config=vision, text_config=text, image_token_id=ids("<|image_pad|>"),
                            video_token_id=ids("<|video_pad|>"), vision_start_token_id=ids("<|vision_start|>"),
                            vision_end_token_id=ids("<|vision_end|>"))


def tiny_processor(tokenizer: PreTrainedTokenizerFast) -> Qwen2_5_VLProcessor:
    """Qwen's image and video processors (CLIP normalisation, the model's patch, merge and temporal sizes)."""
    sizes = dict(patch_size=PATCH, merge_size=2, temporal_patch_size=2, min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS)
    return Qwen2_5_VLProcessor(image_processor=Qwen2VLImageProcessor(**sizes), tokenizer=tokenizer,
                               video_processor=Qwen2VLVideoProcessor(**sizes), chat_template=CHAT_TEMPLATE)


def tiny_adapter(seed: int = 0, device: str | torch.device | None = None,
                 dtype: torch.dtype | None = None) -> QwenVLAdapter:
    """The tiny model behind ``--model tiny``, the same for a given seed; eager attention.

    Placed like the real models (``placement``: CUDA in bf16 when there is a GPU), so the
    tiny model exercises the device path the 7B one takes; on the CPU one torch thread.
    """
    device, dtype = placement(device, dtype)
    tokenizer = byte_tokenizer()
    config = tiny_qwen_config(tokenizer)
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
    adapter = QwenVLAdapter(model.to(device, dtype), tiny_processor(tokenizer), teacher_name="tiny")
    adapter.threads = 1 if device.type == "cpu" else None
    return adapter
