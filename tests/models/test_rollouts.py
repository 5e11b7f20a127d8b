"""Rollouts on the tiny models through the session: naive loop-by-loop products, invariants, refusals."""

from __future__ import annotations

import numpy as np
import pytest

from normviz.core.errors import NormvizError, NotApplicableError

from ..helpers.maps import analysis
from ..helpers.tiny import ARCHS, encoded

ROLLOUTS = {
    "rollout_attn_res": "attn_res",
    "rollout_attn_res_ln": "attn_res_ln",
    "rollout_ff_res": "ff_res",
    "rollout_ff_res_ln": "ff_res_ln",
}


@pytest.mark.parametrize("arch", ARCHS)
def test_rollouts_equal_naive_products(tiny_model, arch):
    lm = tiny_model(arch)
    keys = ["attention", "rollout_attention"] + [
        k for k in ROLLOUTS if lm.spec.placement == "post" or k != "rollout_ff_res_ln"
    ]
    a = analysis(
        lm, encoded(n=7), keys + list(ROLLOUTS.values())[:3] + (["ff_res_ln"] if lm.spec.placement == "post" else [])
    )
    n = a.n_tokens
    # attention rollout, written out loop by loop
    acc = np.eye(n)
    for layer in range(a.n_layers):
        mean = a["attention"][layer].mean(0)
        step = 0.5 * mean + 0.5 * np.eye(n)
        step = step / step.sum(1, keepdims=True)
        acc = step @ acc
        np.testing.assert_allclose(a["rollout_attention"][layer], acc, rtol=1e-12, atol=1e-14)
    for key, src in ROLLOUTS.items():
        if key not in a:
            continue
        acc = np.eye(n)
        for layer in range(a.n_layers):
            m = a[src][layer]
            acc = (m / m.sum(1, keepdims=True)) @ acc
            np.testing.assert_allclose(a[key][layer], acc, rtol=1e-12, atol=1e-14)
    for key in a.keys():
        if key.startswith("rollout_"):
            np.testing.assert_allclose(a[key].sum(-1), 1, atol=1e-12)
            assert np.all(a[key] >= 0)
            if lm.spec.placement == "pre":
                assert np.all(np.triu(a[key], 1) == 0), key


def test_post_ln_only_key_refused_for_decoders(tiny_model):
    lm = tiny_model("gpt2")
    with pytest.raises(NotApplicableError, match="post"):
        analysis(lm, encoded(n=4), ["rollout_ff_res_ln"])
    assert issubclass(NotApplicableError, NormvizError)


def test_asking_one_rollout_computes_only_its_source(tiny_model):
    lm = tiny_model("bert")
    a = analysis(lm, encoded(n=4), ["rollout_attn_res"])
    assert set(a.keys()) == {"attn_res", "rollout_attn_res"}
    assert "rollout_attn_res" in a.notes
