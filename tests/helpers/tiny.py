"""Tiny randomly initialised models of every supported architecture, in float64 (the conftest fixture
``tiny_model(arch)`` caches them per session; :func:`build` makes a fresh one): :mod:`tools.tiny`."""

import torch  # noqa: E402
import transformers as tf  # noqa: E402

import normviz  # noqa: E402
from tools.tiny import (  # noqa: F401 — re-exported: the tests import them from here
    ARCHS,
    COMMON,
    LATER_ARCHS,
    _configs,
    build,
    config_of,
    distinct,
    encoded,
    from_ids,
    randomize_weights,
)

# ---------------------------------------------------------------- models with their LM head (prediction attribution)
HEAD_ARCHS = {
    "llama": "causal",
    "llama_bias": "causal",
    "qwen2": "causal",
    "gpt2": "causal",
    "bert": "masked",
    "qwen3": "causal",
    **{a: "causal" for a in LATER_ARCHS},
}


def build_with_head(arch: str, seed: int = 0, dtype=torch.float64):
    """A random model of ``arch`` with its LM head (``…ForCausalLM``, GPT-2's LMHeadModel, BertForMaskedLM),
    untied from the embeddings so the readout is its own matrix. ``llama_bias``: Llama with every bias on."""
    base = "llama" if arch == "llama_bias" else arch
    config = config_of(base)
    if arch == "llama_bias":
        config.attention_bias = config.mlp_bias = True
    config.tie_word_embeddings = False
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    auto = tf.AutoModelForMaskedLM if HEAD_ARCHS[arch] == "masked" else tf.AutoModelForCausalLM
    model = auto.from_config(config, attn_implementation="eager").to(dtype).eval()
    randomize_weights(model)
    return normviz.from_model(model, None, name=f"tiny-{arch}-lm")
