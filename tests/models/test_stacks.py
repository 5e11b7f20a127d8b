"""Stacks as objects (:class:`normviz.methods.keyspace.Stack`): one stack of one input, its spelling, rows and columns,
model view and Request (built once), as the session, the scheduler and the one-layer path read them."""

from __future__ import annotations

import pytest

import normviz
from normviz.core.errors import NotApplicableError
from normviz.methods import keyspace
from tools.tiny import build_seq2seq

from ..helpers.tiny import encoded


def test_a_self_attention_models_one_stack(tiny_model):
    lm = tiny_model("bert")
    s = normviz.Session.from_encoded(lm, [encoded(n=9)])[0]
    stack = s.stack("model")
    assert (stack.name, stack.rows, stack.cols, stack.prefix) == ("model", 9, 9, "")
    assert stack.request is stack.request and stack.request is s.request and stack.model is lm
    assert stack.spell("norm") == "norm" and stack.own("norm") == "norm" and stack.holds("norm")
    # a stack this model lacks: the first stack's request, whose check refuses with the reason
    assert s.request_of("encoder") is s.request
    with pytest.raises(NotApplicableError, match="encoder"):
        s.get(["encoder_norm"])


def test_an_encoder_decoders_three_stacks():
    lm = build_seq2seq("marian")
    s = normviz.Session(lm, "the big cat sat on the red mat", target="le grand chat assis sur le tapis rouge")
    enc, dec, cross = (s.stack(n) for n in ("encoder", "decoder", "cross"))
    n_src, n_tgt = len(s.src_tokens), len(s.tgt_tokens)
    assert (enc.rows, enc.cols, dec.rows, cross.rows, cross.cols) == (n_src, n_src, n_tgt, n_tgt, n_src)
    assert enc.spell("norm") == "encoder_norm" and enc.own("encoder_norm") == "norm"
    assert enc.holds("encoder_norm") and not dec.holds("encoder_norm") and cross.holds("cross_norm")
    assert cross.request.n_tokens == n_tgt and s.array_shape("cross_norm")[-2:] == (n_tgt, n_src)
    assert dec.model is keyspace.stack_model(lm, "decoder")
