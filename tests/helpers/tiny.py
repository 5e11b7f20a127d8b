"""Tiny randomly initialised models of every supported architecture, in float64 (the conftest fixture
``tiny_model(arch)`` caches them per session; :func:`build` makes a fresh one)."""
from __future__ import annotations

import torch
import transformers as tf

import normviz
from normviz.tokens import Encoded

COMMON = dict(vocab_size=97)


def _configs():
    return {
        "bert": tf.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                              max_position_embeddings=64, **COMMON),
        "roberta": tf.RobertaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
                                    max_position_embeddings=70, pad_token_id=1, **COMMON),
        "electra": tf.ElectraConfig(embedding_size=24, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                    intermediate_size=64, max_position_embeddings=64, **COMMON),
        "distilbert": tf.DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
                                          **COMMON),
        "gpt2": tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0,
                              **COMMON),
        "llama": tf.LlamaConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                intermediate_size=48, max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                                **COMMON),
        "mistral": tf.MistralConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=1,
                                    intermediate_size=48, max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                                    **COMMON),
        "qwen2": tf.Qwen2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                intermediate_size=48, max_position_embeddings=64, bos_token_id=1, eos_token_id=2,
                                **COMMON),
        "qwen3": tf.Qwen3Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                head_dim=8, intermediate_size=48, max_position_embeddings=64, bos_token_id=1,
                                eos_token_id=2, **COMMON),
    }


ARCHS = list(_configs())


@torch.no_grad()
def randomize_weights(model) -> None:
    """Weights large enough to make every nonlinearity matter; norm scales around 1."""
    for name, p in model.named_parameters():
        if "norm" in name.lower() and name.endswith("weight"):
            p.normal_(1.0, 0.3)
        elif name.endswith("bias"):
            p.normal_(0.0, 0.3)
        else:
            p.normal_(0.0, 0.35)


def build(arch: str, seed: int = 0, dtype=torch.float64):
    """A random base model of one supported architecture, ready for analysis."""
    config = _configs()[arch]
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = tf.AutoModel.from_config(config, attn_implementation="eager").to(dtype).eval()
    randomize_weights(model)
    return normviz.from_model(model, None, name=f"tiny-{arch}")


def encoded(n: int = 9, seed: int = 1, vocab: int = 97) -> Encoded:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (n,), generator=g).tolist()
    return Encoded(ids=ids, tokens=[f"t{i}" for i in ids], labels=[f"t{i}" for i in ids], special=[False] * n,
                   dropped=0)


def distinct(n: int) -> Encoded:
    """n different tokens. (Repeated tokens have equal value vectors at layer 0 of a model without position
    embeddings in the residual stream (Llama), which is a genuine rank deficiency of T.)"""
    ids = list(range(11, 11 + 5 * n, 5))
    return Encoded(ids=ids, tokens=[f"t{i}" for i in ids], labels=[f"t{i}" for i in ids], special=[False] * n,
                   dropped=0)


def from_ids(ids: list[int]) -> Encoded:
    return Encoded(ids=list(ids), tokens=[str(i) for i in ids], labels=[str(i) for i in ids],
                   special=[False] * len(ids), dropped=0)


# ---------------------------------------------------------------- models with their LM head (prediction attribution)
HEAD_ARCHS = {"llama": "causal", "llama_bias": "causal", "qwen2": "causal", "gpt2": "causal", "bert": "masked"}


def build_with_head(arch: str, seed: int = 0, dtype=torch.float64):
    """A random model of ``arch`` with its LM head (``…ForCausalLM``, GPT-2's LMHeadModel, BertForMaskedLM),
    untied from the embeddings so the readout is its own matrix. ``llama_bias``: Llama with every bias on."""
    base = "llama" if arch == "llama_bias" else arch
    config = _configs()[base]
    if arch == "llama_bias":
        config.attention_bias = config.mlp_bias = True
    config.tie_word_embeddings = False
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    auto = tf.AutoModelForMaskedLM if HEAD_ARCHS[arch] == "masked" else tf.AutoModelForCausalLM
    model = auto.from_config(config, attn_implementation="eager").to(dtype).eval()
    randomize_weights(model)
    return normviz.from_model(model, None, name=f"tiny-{arch}-lm")
