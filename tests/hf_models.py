"""Tiny Qwen2.5-VL-7B-Instruct and InternVL3-8B-hf look-alikes, built offline at test time.

Why: the adapters must feed these models what their own processors feed them, and
the parts that decide that (patch, merge, window and temporal sizes, token ids,
the processors' pixel budgets, normalisation and frame layout) are copied here
from the real checkpoints' configs. Only depth and width are shrunk and the
weights are random, so a model builds in well under a second and no file is
downloaded.

The tokenizers: no Qwen tokenizer is on this machine and the hub is out of reach.
A byte-level tokenizer (one id per byte symbol) is padded with never-produced
filler entries so that Qwen2's special tokens land on their real ids (151643
onwards); the chat templates lay conversations out as the checkpoints' do
(Qwen2.5-VL's is the tiny model's, ``vqa_bridge.adapters.tiny.CHAT_TEMPLATE``).
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from vqa_bridge.adapters.tiny import CHAT_TEMPLATE

# Qwen2's special tokens in id order from 151643 (the tail shared by Qwen2.5-VL and InternVL3's LLM).
QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
                "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
                "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
                "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
                "<|repo_name|>", "<|file_sep|>"]
FIRST_SPECIAL_ID = 151643
# InternVL3 appends its image and grounding tokens after Qwen2's (``<img>`` is 151665, ``<IMG_CONTEXT>`` 151667).
INTERNVL_SPECIAL = ["<img>", "</img>", "<IMG_CONTEXT>", "<quad>", "</quad>", "<ref>", "</ref>", "<box>", "</box>",
                    "<video>"]

INTERNVL_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'video' %}<video>\n{% elif c['type'] == 'image' %}<image>\n"
    "{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def qwen_tokenizer(extra: list[str] = (), **named) -> PreTrainedTokenizerFast:
    """Byte-level tokenizer whose special tokens sit at Qwen2's ids; ``extra`` follow them."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab.update({f"<filler_{i}>": i for i in range(len(alphabet), FIRST_SPECIAL_ID)})
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    core.decoder = decoders.ByteLevel()
    core.add_special_tokens(QWEN_SPECIAL + list(extra))  # in order, so each lands on its real id
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>", **named)
    assert tok.convert_tokens_to_ids("<|endoftext|>") == FIRST_SPECIAL_ID
    return tok


def tiny_qwen2_5_vl(seed: int = 0):
    """(model, processor): Qwen2.5-VL-7B-Instruct's vision geometry and token ids, 2+2 vision blocks, 2 text layers."""
    from transformers import (GenerationConfig, Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration,
                              Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor)

    tok = qwen_tokenizer()
    ids = tok.convert_tokens_to_ids
    # Real: depth 32 with full attention every 8th block, 1280 wide, 16 heads; here 4 blocks, full every 2nd.
    vision = dict(depth=4, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64, hidden_act="silu",
                  patch_size=14, spatial_merge_size=2, temporal_patch_size=2, window_size=112,
                  fullatt_block_indexes=[1, 3], tokens_per_second=2)
    # Real: 3584 wide, 28 heads of 128 with mrope_section [16, 24, 24] (a quarter, 3/8, 3/8 of half a head).
    text = dict(vocab_size=152064, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, max_position_embeddings=128000, rms_norm_eps=1e-6,
                rope_parameters={"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": [2, 3, 3]},
                bos_token_id=151643, eos_token_id=151645, tie_word_embeddings=False)
    config = Qwen2_5_VLConfig(vision_config=vision, text_config=text, image_token_id=ids("<|image_pad|>"),
                              video_token_id=ids("<|video_pad|>"), vision_start_token_id=ids("<|vision_start|>"),
                              vision_end_token_id=ids("<|vision_end|>"))
    assert (config.image_token_id, config.video_token_id, config.vision_start_token_id) == (151655, 151656, 151652)
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config).float()
    # The checkpoint's generation_config.json samples (the adapters must override it).
    model.generation_config = GenerationConfig(bos_token_id=151643, pad_token_id=151643, eos_token_id=[151645, 151643],
                                               do_sample=True, repetition_penalty=1.05, temperature=0.1, top_p=0.001,
                                               top_k=1)
    clip = dict(image_mean=[0.48145466, 0.4578275, 0.40821073], image_std=[0.26862954, 0.26130258, 0.27577711],
                patch_size=14, temporal_patch_size=2, merge_size=2)
    # preprocessor_config.json's image budget; videos take the video processor's own (128 to 768 merged tokens a frame).
    images = Qwen2VLImageProcessor(min_pixels=3136, max_pixels=12845056, **clip)
    videos = Qwen2VLVideoProcessor(min_pixels=128 * 28 * 28, max_pixels=768 * 28 * 28, **clip)
    processor = Qwen2_5_VLProcessor(image_processor=images, tokenizer=tok, video_processor=videos,
                                    chat_template=CHAT_TEMPLATE)
    return model, processor


def tiny_internvl3(seed: int = 0):
    """(model, processor): InternVL3-8B-hf's 448 px frames, 14 px patches, pixel shuffle 0.5, token ids; 2+2 layers."""
    from transformers import (GenerationConfig, GotOcr2ImageProcessor, InternVLConfig,
                              InternVLForConditionalGeneration, InternVLProcessor, InternVLVideoProcessor)

    tok = qwen_tokenizer(INTERNVL_SPECIAL, extra_special_tokens={
        "start_image_token": "<img>", "end_image_token": "</img>", "context_image_token": "<IMG_CONTEXT>",
        "video_token": "<video>"})
    assert tok.convert_tokens_to_ids("<IMG_CONTEXT>") == 151667
    # Real: InternViT-300M (24 layers, 1024 wide, 16 heads), Qwen2.5-7B (28 layers, 3584 wide).
    vision = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                  image_size=[448, 448], patch_size=[14, 14], norm_type="layer_norm", use_qk_norm=False,
                  layer_scale_init_value=0.1)
    text = dict(model_type="qwen2", vocab_size=151674, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, rope_theta=1000000.0, bos_token_id=151643,
                eos_token_id=151645)
    config = InternVLConfig(vision_config=vision, text_config=text, image_token_id=151667, image_seq_length=256,
                            downsample_ratio=0.5, projector_hidden_act="gelu", vision_feature_layer=-1,
                            vision_feature_select_strategy="default")
    config._attn_implementation = "eager"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = InternVLForConditionalGeneration(config).float()
    model.generation_config = GenerationConfig(bos_token_id=151643, eos_token_id=151645, do_sample=True,
                                               temperature=0.7, top_p=0.9)
    imagenet = dict(image_mean=[0.485, 0.456, 0.406], image_std=[0.229, 0.224, 0.225])
    images = GotOcr2ImageProcessor(size={"height": 448, "width": 448}, crop_to_patches=False, min_patches=1,
                                   max_patches=12, **imagenet)
    videos = InternVLVideoProcessor(size={"height": 448, "width": 448}, **imagenet)
    processor = InternVLProcessor(image_processor=images, tokenizer=tok, video_processor=videos,
                                  image_seq_length=256, chat_template=INTERNVL_TEMPLATE)
    return model, processor
