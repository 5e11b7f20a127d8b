"""Issue 19: ``sources`` and ``bias`` — every token's part carried through the whole network — against a plain
token-by-token propagation from the raw modules (tests/attribution/reference.py, SwiGLU's integrals by
quadrature, not the closed form), complete against the model's own logits, with the cost check before anything
runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.errors import TooCostlyError

from ..helpers import tiny
from . import reference as ref

ARCHS = ["llama", "llama_bias", "qwen2", "gpt2", "bert"]
TOL = {"llama": 2e-6, "llama_bias": 2e-6, "qwen2": 2e-6, "gpt2": 1e-9, "bert": 1e-9}


def _session(lm, enc, options=None):
    return normviz.Session.from_encoded(lm, [enc], options=options)[0]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("foil", [None, 11])
def test_sources_follow_the_rules_and_are_complete(head_model, arch, foil):
    lm = head_model(arch)
    enc = tiny.encoded(n=8, seed=5)
    i = 5
    s = _session(lm, enc)
    e = s.explain(foil=foil, position=i)
    hm = lm.head_model
    with torch.no_grad():
        real = hm(input_ids=torch.tensor([enc.ids])).logits[0, i].to(torch.float64)
    total = float(real[e.token] - (real[foil] if foil is not None else 0.0))
    assert abs(e.total - total) <= 1e-12 * abs(total)
    out_emb = hm.get_output_embeddings()
    u = out_emb.weight[e.token] - (out_emb.weight[foil] if foil is not None else 0)
    b = out_emb.bias
    b_u = 0.0 if b is None else float(b[e.token] - (b[foil] if foil is not None else 0))
    want, want_bias, _ = ref.naive_sources(hm, enc.ids, i, u, b_u)
    assert e.sources.shape == (len(enc.ids),)
    scale = float(np.abs(e.sources).max())
    # (Llama family: the norms' scales come from the model's own vectors, in which its RMSNorm rounded through
    # float32; the plain propagation takes them from the sum of its parts)
    assert np.abs(e.sources - want.numpy()).max() <= TOL[arch] * scale, arch
    assert abs(e.bias - want_bias) <= TOL[arch] * max(scale, 1.0)
    assert abs(e.sources.sum() + e.bias - total) <= TOL[arch] * abs(total), (arch, e.sources.sum() + e.bias, total)
    if lm.spec.causal:
        assert np.abs(e.sources[i + 1 :]).max() == 0  # later tokens take no part
    assert s.forward_passes == 1


def test_no_bias_model_has_a_zero_bias_part(head_model):
    """Llama without biases and RMSNorm without β: nothing for the bias part to carry."""
    lm = head_model("llama")
    e = _session(lm, tiny.encoded(n=6)).explain()
    assert e.bias == 0.0


def test_sources_are_cost_checked_before_they_run(head_model):
    lm = head_model("gpt2")
    s = _session(lm, tiny.encoded(n=9), options={"explain_budget_s": 1e-12})
    e = s.explain()
    passes = s.forward_passes
    assert np.isfinite(e.heads).all()  # the direct parts are not refused
    with pytest.raises(TooCostlyError, match="explain_budget_s"):
        e.sources
    assert "up to about" in normviz.attribution.sources_refusal(s)
    s2 = _session(lm, tiny.encoded(n=9), options={"explain_max_bytes": 100})
    with pytest.raises(TooCostlyError, match="explain_max_bytes"):
        s2.explain().sources
    assert s.forward_passes == passes == 1
