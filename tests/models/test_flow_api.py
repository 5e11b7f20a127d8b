"""Attention flow through the public API: a decoder, the timing target on minilm, refusal before the pass."""

from __future__ import annotations

import time

import numpy as np
import pytest

import normviz
from normviz.core.errors import TooCostlyError
from normviz.methods.rollouts import attention_with_residual

from ..helpers.maps import analysis, count_forward
from ..helpers.tiny import encoded


def test_flow_through_the_api_on_a_decoder(tiny_model):
    lm = tiny_model("llama")
    a = analysis(lm, encoded(n=8), ["flow"])
    assert a["flow"].shape == (2, 8, 8)
    assert np.all(np.triu(a["flow"], 1) == 0)
    np.testing.assert_allclose(a["flow"].sum(-1), 1, atol=1e-9)
    assert "flow" in a.notes


def test_minilm_32_tokens_all_layers_within_target(minilm):
    lm = minilm
    text = (
        "The quick brown fox jumps over the lazy dog while the small grey cat quietly watches "
        "from the old wooden fence near the wide river bank on a sunny day"
    )
    a = normviz.analyze(lm, text, methods=["attention"])
    assert a.n_tokens == 32
    start = time.process_time()  # CPU seconds: under load wall time measures the other processes too
    b = normviz.analyze(lm, text, methods=["flow"])
    elapsed = time.process_time() - start
    assert elapsed < 10, f"flow took {elapsed:.1f} s"
    assert b["flow"].shape == (6, 32, 32)
    np.testing.assert_allclose(b["flow"].sum(-1), 1, atol=1e-6)
    np.testing.assert_allclose(b["flow"][0], attention_with_residual(a["attention"].astype(np.float64))[0], atol=1e-6)


def test_300_tokens_refused_before_the_forward_pass(minilm):
    lm = minilm
    text = " ".join(["word"] * 298)
    start = time.process_time()  # CPU seconds (a refusal before the pass takes milliseconds)
    with pytest.raises(TooCostlyError) as err:
        normviz.analyze(lm, text, methods=["flow"])
    assert time.process_time() - start < 5
    msg = str(err.value)
    assert "300 tokens" in msg and "flow_max_tokens" in msg and "rollout_attention" in msg
    session = normviz.Session(lm, text)
    with count_forward(lm.model) as calls, pytest.raises(TooCostlyError):
        session.get(["flow"])
    assert calls[0] == 0 and session.forward_passes == 0  # refused by the check, before any forward pass
    assert "flow_max_tokens" in session.refusal("flow")
