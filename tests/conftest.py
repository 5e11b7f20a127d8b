"""Fixtures shared by every test directory.

tiny_model(arch, seed=0, dtype=float64)   a random base model of one supported architecture (cached)
records(arch, enc=None, n=9, seed=1)      (lm, enc, [LayerRecord per layer]) of one recorded sequence
head_model(arch)                          a tiny float64 model with its LM head (cached)
seq2seq_model(arch)                       a tiny float64 encoder–decoder (cached)
minilm, smollm2                           the embedded models, loaded once per session (float32, CPU)
tiny_bert_dir, tiny_llama_dir             tiny random models saved with a real tokenizer (corpus tests)
"""

from __future__ import annotations

import pytest
import torch

import normviz
from normviz.core.tokens import pad_batch
from normviz.record.recorder import record

from .helpers import tiny
from .helpers.corpus import make_tiny_dir


@pytest.fixture(scope="session")
def tiny_model():
    cache: dict = {}

    def make(arch: str, seed: int = 0, dtype=torch.float64):
        key = (arch, seed, dtype)
        if key not in cache:
            cache[key] = tiny.build(arch, seed=seed, dtype=dtype)
        return cache[key]

    return make


@pytest.fixture(scope="session")
def head_model():
    """``head_model(arch)``: a tiny float64 model with its LM head (tests/helpers/tiny.py), cached per session
    (prediction attribution, interventions, faithfulness)."""
    return per_arch(tiny.build_with_head)


@pytest.fixture(scope="session")
def seq2seq_model():
    """``seq2seq_model(arch)``: a tiny float64 encoder–decoder (tests/helpers/seq2seq.py), cached per session."""
    from .helpers import seq2seq

    return per_arch(seq2seq.build)


def per_arch(build):
    """``build(arch)``, called once per architecture (the fixtures' cache)."""
    cache: dict = {}

    def make(arch):
        if arch not in cache:
            cache[arch] = build(arch)
        return cache[arch]

    return make


@pytest.fixture(scope="session")
def records(tiny_model):
    def make(arch: str, enc=None, n: int = 9, seed: int = 1):
        lm = tiny_model(arch)
        enc = enc if enc is not None else tiny.encoded(n=n, seed=seed)
        ids, mask = pad_batch([enc])
        return lm, enc, record(lm, ids, mask)[0]

    return make


@pytest.fixture(scope="session")
def minilm():
    return normviz.load("minilm", device="cpu")


@pytest.fixture(scope="session")
def smollm2():
    return normviz.load("smollm2", device="cpu")


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory):
    return make_tiny_dir("bert", tmp_path_factory.mktemp("tiny_bert"))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory):
    return make_tiny_dir("llama", tmp_path_factory.mktemp("tiny_llama"))


@pytest.fixture(scope="session")
def llama_lm_dir(tmp_path_factory):
    """A tiny random Llama with its LM head and minilm's tokenizer, saved with save_pretrained (the CLI tests:
    explain, faithfulness)."""
    import torch
    import transformers as tf

    from .helpers.corpus import _minilm_tokenizer
    from .helpers.tiny import randomize_weights

    path = tmp_path_factory.mktemp("tiny_llama_lm")
    tok = _minilm_tokenizer()
    cfg = tf.LlamaConfig(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        vocab_size=tok.vocab_size,
        max_position_embeddings=128,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
        pad_token_id=0,
    )
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").eval()
    randomize_weights(model)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture
def no_load(monkeypatch):
    """A CLI check that must refuse before the model loads: every ``load`` the CLI may reach fails the test."""
    import normviz
    from normviz import models
    from normviz.models import loading

    def refuse(*a, **k):
        raise AssertionError("the model was loaded")

    for mod in (normviz, loading, models):
        monkeypatch.setattr(mod, "load", refuse)
