"""Run InternVideo2-Chat-8B's own remote code under the project's transformers (5.x), with nothing looked up.

The checkpoint's code (``modeling_videochat2.py`` and the modules it imports) was
written for transformers 4.38 and builds its language model and Q-Former from hub
ids. Each piece below exists because that code does not run here otherwise:

- ``install_transformers_shims``: names ``modeling_qformer.py`` imports from
  ``transformers.modeling_utils`` or calls on ``PreTrainedModel`` that 5.x removed.
- ``local_hub_configs``: ``build_llm`` asks the hub for the config of
  ``mistralai/Mistral-7B-Instruct-v0.3`` and ``build_bridge`` for ``bert-base-uncased``'s
  config and tokenizer; they get fixed local values instead (the published ones, which
  the checkpoint's shapes follow), so building works offline and gated repos need no token.
- ``remote_model_class``: loads the class from the checkpoint folder (its modules import
  each other absolutely in the Feature4X copy, relatively on the hub; both work) and
  adds the ``post_init()`` that ``BaseMLLM.__init__`` never calls and 5.x's
  ``from_pretrained`` needs (and turns off the ViT's training-time activation checkpointing).
- ``CHECKPOINT_KEY_MAPPING``: the weights were saved by peft 0.5, whose LoRA layers kept
  the frozen weight at ``q_proj.weight``; current peft nests it at ``q_proj.base_layer.weight``.

A checkpoint's ``config.json`` may shrink the two hub-built parts (tests build a tiny
checkpoint from the real code this way): ``model_config.llm.config_overrides`` and
``model_config.bridge.bert_config_overrides`` are merged over the published configs.
"""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import Tensor

# The published config of mistralai/Mistral-7B-Instruct-v0.3, the LLM the checkpoint was trained on.
MISTRAL_7B_INSTRUCT_V03 = dict(
    vocab_size=32768, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
    num_key_value_heads=8, hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-5, rope_theta=1e6,
    sliding_window=None, attention_dropout=0.0, initializer_range=0.02, bos_token_id=1, eos_token_id=2,
    tie_word_embeddings=False,
)
# The published config of bert-base-uncased, which ``build_qformer`` starts its Q-Former from.
BERT_BASE_UNCASED = dict(
    vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
    hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, max_position_embeddings=512,
    type_vocab_size=2, initializer_range=0.02, layer_norm_eps=1e-12, pad_token_id=0,
    position_embedding_type="absolute",
)
LLM_HUB_ID = "mistralai/Mistral-7B-Instruct-v0.3"
QFORMER_HUB_ID = "bert-base-uncased"

# peft 0.5 names (what the checkpoint holds) -> current peft names, for the LoRA-wrapped linears of the LLM.
CHECKPOINT_KEY_MAPPING = {r"^(lm\.base_model\.model\..*(?:_proj|lm_head))\.weight$": r"\1.base_layer.weight"}


def install_transformers_shims() -> None:
    """Give transformers 5 back what ``modeling_qformer.py`` needs; adds only missing names, so it is idempotent.

    The module imports ``apply_chunking_to_forward``, ``prune_linear_layer`` (moved to
    ``transformers.pytorch_utils``) and ``find_pruneable_heads_and_indices`` (removed) from
    ``transformers.modeling_utils``, and its ``BertModel.forward`` calls the removed
    ``PreTrainedModel.invert_attention_mask`` and ``get_head_mask``.
    """
    import transformers.modeling_utils as modeling_utils
    from transformers import PreTrainedModel, pytorch_utils

    helpers = {"apply_chunking_to_forward": pytorch_utils.apply_chunking_to_forward,
               "prune_linear_layer": pytorch_utils.prune_linear_layer,
               "find_pruneable_heads_and_indices": _find_pruneable_heads_and_indices}
    for name, helper in helpers.items():
        if not hasattr(modeling_utils, name):
            setattr(modeling_utils, name, helper)
    if not hasattr(PreTrainedModel, "invert_attention_mask"):
        PreTrainedModel.invert_attention_mask = _invert_attention_mask
    if not hasattr(PreTrainedModel, "get_head_mask"):
        PreTrainedModel.get_head_mask = _get_head_mask


def _find_pruneable_heads_and_indices(*args, **kwargs):
    """Only ``BertAttention.prune_heads`` uses it, which inference never calls; the name just has to import."""
    raise NotImplementedError("pruning the Q-Former's attention heads is not supported under transformers 5")


def _invert_attention_mask(self, encoder_attention_mask: Tensor) -> Tensor:
    """transformers 4's semantics: a [B, S] or [B, S, S] keep-mask (1 = attend) -> an additive mask, dtype's min."""
    mask = encoder_attention_mask
    extended = mask[:, None, :, :] if mask.dim() == 3 else mask[:, None, None, :]
    extended = extended.to(self.dtype)
    return (1.0 - extended) * torch.finfo(self.dtype).min


def _get_head_mask(self, head_mask: Tensor | None, num_hidden_layers: int, is_attention_chunked: bool = False):
    """The Q-Former is always called without a head mask, for which transformers 4 returned one None per layer."""
    if head_mask is not None:
        raise NotImplementedError("head masks are not supported for InternVideo2's Q-Former under transformers 5")
    return [None] * num_hidden_layers


class QFormerTokenizerStub:
    """Stands in for ``BertTokenizer.from_pretrained("bert-base-uncased")`` inside ``build_bridge``.

    Building reads only its length (the Q-Former's word-embedding rows: the BERT vocabulary
    plus the ``[DEC]`` token it adds). The tokenizer itself encodes Q-Former instructions,
    which the adapter never sends, so its vocabulary file is not needed; encoding raises.
    """

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size
        self.added: list[str] = []
        self.padding_side = "right"

    def add_special_tokens(self, tokens: dict) -> int:
        new = [t for t in tokens.values() if t not in self.added]
        self.added += new
        return len(new)

    def __len__(self) -> int:
        return self.vocab_size + len(self.added)

    def __call__(self, *args, **kwargs):
        raise RuntimeError("InternVideo2's Q-Former instructions need bert-base-uncased's vocabulary, which is not "
                           "loaded; call encode_vision without an instruction")


def llm_config(model_config):
    """The LLM's config: the published Mistral-7B-Instruct-v0.3 one, with the checkpoint's overrides."""
    from transformers import MistralConfig

    return MistralConfig(**{**MISTRAL_7B_INSTRUCT_V03, **dict(model_config.llm.get("config_overrides") or {})})


def qformer_config(model_config):
    """The Q-Former's starting config: bert-base-uncased's, with the checkpoint's overrides."""
    from transformers import BertConfig

    return BertConfig(**{**BERT_BASE_UNCASED, **dict(model_config.bridge.get("bert_config_overrides") or {})})


@contextmanager
def local_hub_configs(model_config):
    """While the model builds, the two hub ids its code asks for resolve to ``llm_config``/``qformer_config``.

    Any other id goes to transformers as usual. Patched on the classes (not the modules)
    because the remote code imports ``AutoConfig``/``BertConfig``/``BertTokenizer`` by name.
    """
    from transformers import AutoConfig, BertConfig, BertTokenizer

    llm_id = model_config.llm.pretrained_llm_path
    use_local_llm = model_config.llm.name == "mistral_7b" and not Path(llm_id).is_dir()
    classes = (AutoConfig, BertConfig, BertTokenizer)
    own = {cls: cls.__dict__.get("from_pretrained") for cls in classes}  # None: inherited
    hub = {cls: cls.from_pretrained for cls in classes}
    bert = qformer_config(model_config)
    tokenizer = QFormerTokenizerStub(bert.vocab_size)

    def bert_at_final_size():
        # The tokenizer has its [DEC] token by now; sizing the embeddings to match makes the
        # ``resize_token_embeddings`` that follows a no-op. A real resize initialises the new row
        # from the others' mean, which reads values a meta-device build does not have (and the
        # checkpoint overwrites the row anyway).
        bert.vocab_size = len(tokenizer)
        return bert

    local = {AutoConfig: (llm_id if use_local_llm else None, lambda: llm_config(model_config)),
             BertConfig: (QFORMER_HUB_ID, bert_at_final_size),
             BertTokenizer: (QFORMER_HUB_ID, lambda: tokenizer)}

    def resolver(cls):
        name_here, build = local[cls]

        def from_pretrained(name, *args, **kwargs):
            return build() if str(name) == name_here else hub[cls](name, *args, **kwargs)
        return staticmethod(from_pretrained)

    for cls in classes:
        cls.from_pretrained = resolver(cls)
    try:
        yield
    finally:
        for cls in classes:
            if own[cls] is None:
                del cls.from_pretrained
            else:
                cls.from_pretrained = own[cls]


@contextmanager
def _importable_from(folder: Path):
    """The folder's modules importable by their bare names, for code that imports its siblings absolutely.

    Stale modules of the same names (another checkpoint folder loaded earlier) are dropped
    before and after, so each folder runs its own files.
    """
    names = [p.stem for p in folder.glob("*.py")]

    def drop():
        for name in names:
            sys.modules.pop(name, None)

    drop()
    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))
        drop()


def remote_model_class(folder: Path):
    """``InternVideo2_VideoChat2`` from the folder's own code, built offline, with the missing ``post_init()``."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    install_transformers_shims()
    auto_map = json.loads((folder / "config.json").read_text())["auto_map"]
    with _importable_from(folder):
        remote = get_class_from_dynamic_module(auto_map["AutoModel"], str(folder))

    class InternVideo2Chat(remote):
        """The remote class, built with local LLM/Q-Former configs and finished with ``post_init()``."""

        def __init__(self, config):
            with local_hub_configs(config.model_config):
                super().__init__(config)
            # The config asks for activation checkpointing in the ViT blocks (``use_checkpoint``), a training
            # memory saver; at inference it only recomputes nothing and warns (torch announces it will raise
            # for checkpoint calls without ``use_reentrant``, which this code makes).
            for block in getattr(self.vision_encoder, "blocks", []):
                block.with_cp = False
            self.post_init()

    InternVideo2Chat.__name__ = remote.__name__
    return InternVideo2Chat


def build_skeleton(model_class, folder: Path):
    """The model built on the meta device (shapes and names, no memory, no weights read).

    Under transformers' own meta-safe creation ops, as ``from_pretrained`` builds it: the
    remote code computes its drop-path schedules with ``torch.linspace(...).item()``.
    """
    from transformers import initialization as init

    config = model_class.config_class.from_pretrained(str(folder))
    with torch.device("meta"), init.meta_device_safe_creation_ops(), init.no_init_weights():
        return model_class(config)
