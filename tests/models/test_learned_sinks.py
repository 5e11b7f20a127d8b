"""Learned attention sinks (GPT-OSS, ``ArchSpec.attn_sinks``): ``normviz.methods.sinks.learned_sinks`` names the
share of each softmax row that the head's sink logit s_h takes, σ^h_i = exp(s_h) / (exp(s_h) + Σ_j exp(e^h_ij)).
Checked through the model itself: raising every s_h by δ moves each row's logit(σ) by exactly δ (the scores e stay;
float32: compared as σ' = sigmoid(logit(σ) + δ)); the recomputed-α path (q, k records) gives the same shares; rows
without learned sinks are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz.core.errors import NotApplicableError
from normviz.methods.sinks import learned_sinks
from normviz.models.params import get_path
from normviz.session.session import Session

from ..helpers import tiny


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p) - np.log1p(-p)


def test_the_sink_share_is_the_sink_logits_softmax_share():
    lm = tiny.build_with_head("gpt_oss", dtype=torch.float32)  # its own copy: the sinks are moved below
    enc = tiny.encoded(10, seed=1)
    share = learned_sinks(Session.from_encoded(lm, [enc])[0])
    assert share.shape == (lm.n_layers, lm.n_heads, 10)
    assert np.all(share > 0) and np.all(share < 1)
    qk = learned_sinks(Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0])
    np.testing.assert_allclose(qk, share, atol=1e-6)
    delta = 0.75
    with torch.no_grad():
        for layer in lm.layers:
            get_path(layer, lm.spec.attn_sinks).add_(delta)
    moved = learned_sinks(Session.from_encoded(lm, [enc])[0])
    # layer 0's scores do not depend on the sinks; later layers' inputs do: compare layer 0 only
    predicted = 1.0 / (1.0 + np.exp(-(_logit(share[0]) + delta)))  # σ' = sigmoid(logit(σ) + δ)
    np.testing.assert_allclose(moved[0], predicted, atol=1e-5)
    assert np.abs(moved[0] - share[0]).max() > 1e-2  # the check has teeth: the shares moved
    assert np.all(moved[0] > share[0])


def test_a_model_without_learned_sinks_is_refused(head_model):
    s = Session.from_encoded(head_model("llama"), [tiny.encoded(6)])[0]
    with pytest.raises(NotApplicableError, match="no learned attention sinks"):
        learned_sinks(s)
