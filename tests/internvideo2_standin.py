"""A tiny model with InternVideo2-Chat's module layout and call chain, for fast tests of the bridge.

The real remote code, built tiny, is tests/internvideo2_tiny.py (a 1408-wide ViT at
224 px: seconds per call); this 32 px look-alike serves the tests that need many calls
or must run without ../shared. It mirrors what the adapter relies on (see
vqa_bridge/adapters/internvideo2.py): ``vision_encoder`` maps [B,C,T,H,W] to
[B, 1 + T*L, C] (CLS first), ``encode_vision`` applies
``vision_layernorm`` then the Q-Former's ``bert`` with ``query_tokens`` +
``extra_query_tokens`` cross-attending to the tokens, ``pad_text_embeds`` puts
``project_up`` of the queries where ``video_idx`` is 1, ``lm`` is a causal LM and
``generate_caption`` decodes from those embeddings. Sizes are tiny; weights seeded.
"""

from __future__ import annotations

from types import SimpleNamespace

import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM, PretrainedConfig, PreTrainedModel

from vqa_bridge.adapters.tiny import byte_tokenizer


class TinyVisionEncoder(nn.Module):
    """Tubelet-1 patch embedding + CLS + positional embedding + one transformer layer, across the whole clip."""

    def __init__(self, dim: int = 24, patch: int = 8, image: int = 32, frames: int = 4):
        super().__init__()
        self.patch = nn.Conv3d(3, dim, (1, patch, patch), (1, patch, patch))
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 1 + frames * (image // patch) ** 2, dim) * 0.02)
        self.block = nn.TransformerEncoderLayer(dim, 2, 48, dropout=0.0, batch_first=True)

    def forward(self, image, use_image=False):
        x = self.patch(image).flatten(2).transpose(1, 2)  # [B, T*h*w, C], frame by frame
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos[:, : x.shape[1] + 1]
        return self.block(x)


class TinyQFormerBert(nn.Module):
    """Queries self-attend and cross-attend to the vision tokens; ``bert(...)`` call signature as the real one."""

    def __init__(self, dim: int = 16, vision_dim: int = 24):
        super().__init__()
        self.kv = nn.Linear(vision_dim, dim)
        self.layer = nn.TransformerDecoderLayer(dim, 2, 32, dropout=0.0, batch_first=True)

    def forward(self, query_embeds, encoder_hidden_states, encoder_attention_mask, return_dict=True):
        memory_mask = encoder_attention_mask == 0
        out = self.layer(query_embeds, self.kv(encoder_hidden_states), memory_key_padding_mask=memory_mask)
        return SimpleNamespace(last_hidden_state=out)


class StandInConfig(PretrainedConfig):
    """Lets the stand-in be saved and loaded like remote code (``auto_map`` + ``trust_remote_code``)."""

    model_type = "internvideo2_chat_standin"

    def __init__(self, vocab: int = 263, frames: int = 4, initializer_range: float = 0.3, **kwargs):
        self.vocab = vocab
        self.frames = frames
        # Larger than the usual 0.02 so that, with two layers, the answer visibly depends on the video.
        self.initializer_range = initializer_range
        super().__init__(**kwargs)


class InternVideo2ChatStandIn(PreTrainedModel):
    config_class = StandInConfig

    def __init__(self, config: StandInConfig):
        super().__init__(config)
        vocab, frames = config.vocab, config.frames
        self.vision_encoder = TinyVisionEncoder(frames=frames)
        self.vision_layernorm = nn.LayerNorm(24)
        self.qformer = nn.Module()
        self.qformer.bert = TinyQFormerBert()
        self.query_tokens = nn.Parameter(torch.randn(1, 6, 16))
        self.extra_num_query_token = 2
        self.extra_query_tokens = nn.Parameter(torch.randn(1, 2, 16))
        self.project_up = nn.Linear(16, 32)
        config = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512)
        config._attn_implementation = "eager"
        self.lm = LlamaForCausalLM(config)
        self.post_init()

    def encode_vision(self, image, instruction=None):
        B, T = image.shape[0], image.shape[2]
        embeds = self.vision_encoder(image, use_image=T == 1)
        embeds = self.vision_layernorm(embeds.reshape(B, -1, embeds.shape[-1]))
        atts = torch.ones(embeds.shape[:-1], dtype=torch.long)
        queries = torch.cat([self.query_tokens, self.extra_query_tokens], 1).expand(B, -1, -1)
        out = self.qformer.bert(query_embeds=queries, encoder_hidden_states=embeds, encoder_attention_mask=atts,
                                return_dict=True)
        return out.last_hidden_state[:, : queries.shape[1]]

    def pad_text_embeds(self, input_ids, image=None, video=None, image_idx=None, video_idx=None, instruction=None):
        text = self.lm.get_input_embeddings()(input_ids.long()).detach()
        visual = self.project_up(self.encode_vision(video.permute(0, 2, 1, 3, 4), instruction))
        text[video_idx == 1] = visual.reshape(-1, visual.shape[-1]).to(text.dtype)
        return text

    def generate_caption(self, input_ids, attention_mask, image_idx=None, video_idx=None, image=None, video=None,
                         num_beams=1, max_new_tokens=200, do_sample=True, **_):
        embeds = self.pad_text_embeds(input_ids=input_ids, video=video, video_idx=video_idx)
        return self.lm.generate(inputs_embeds=embeds, attention_mask=attention_mask, num_beams=num_beams,
                                max_new_tokens=max_new_tokens, do_sample=do_sample)


def standin_model(frames: int = 4, seed: int = 0) -> tuple[InternVideo2ChatStandIn, object]:
    tok = byte_tokenizer()
    torch.manual_seed(seed)
    return InternVideo2ChatStandIn(StandInConfig(vocab=len(tok), frames=frames)), tok


def standin_adapter(frames: int = 4):
    from vqa_bridge.adapters.internvideo2 import InternVideo2Adapter

    model, tok = standin_model(frames)
    return InternVideo2Adapter(model, tok, image_size=32, clip_frames=frames)
