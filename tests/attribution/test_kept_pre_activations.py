"""Issue 38: explain's backward pass takes the FF factors from the pre-activations the recording pass kept (a float32
model whose first reader is explain: ``keep_ff``) instead of computing the FF input projections again. The same
sources as the recomputed path, up to float32 rounding; each kept tensor read once (the factors made from it are
what is kept); the cap; float64 models recompute (their norms may round to float32: Llama's, Gemma's RMSNorm)."""

from __future__ import annotations

import numpy as np
import pytest

import normviz

from ..helpers import tiny

# gated SiLU; GeGLU with norms after the sublayers; GPT-2's Conv1D MLP; Phi-3's fused gate | up; a parallel block
ARCHS = ["llama", "gemma3_text", "gpt2", "phi3", "gpt_neox"]


@pytest.fixture(scope="module")
def float32_model():
    import torch

    cache: dict = {}

    def make(arch):
        if arch not in cache:
            cache[arch] = tiny.build_with_head(arch, dtype=torch.float32)
        return cache[arch]

    return make


@pytest.mark.parametrize("arch", ARCHS)
def test_kept_pre_activations_give_the_recomputed_sources(float32_model, arch):
    lm = float32_model(arch)
    enc = tiny.encoded(n=9, seed=4)
    kept = normviz.Session.from_encoded(lm, [enc])[0]
    e = kept.explain(position=6)  # the first reader: the pass keeps the FF pre-activations
    recs = [v.rec for v in kept.layers()]
    assert all(r.ff_a is not None for r in recs)
    assert all((r.ff_b is not None) == (lm.spec.ff_up is not None) for r in recs)
    got = e.sources
    assert all(r.ff_a is None and r.ff_b is None for r in recs)  # read once, then the factors are kept
    plain = normviz.Session.from_encoded(lm, [enc])[0]
    plain.layers()  # recorded for the maps first: nothing kept, the projections are recomputed
    assert all(v.rec.ff_a is None for v in plain.layers())
    want = plain.explain(position=6).sources
    scale = np.abs(want).max()
    assert np.abs(got - want).max() <= 1e-5 * scale, np.abs(got - want).max() / scale
    assert abs(got.sum() + e.bias - e.total) <= 1e-5 * max(scale, abs(e.total))  # still the model's logit
    assert kept.forward_passes == 1


def test_float64_models_recompute(head_model):
    s = normviz.Session.from_encoded(head_model("llama"), [tiny.encoded(n=6, seed=1)])[0]
    s.explain()
    assert all(v.rec.ff_a is None for v in s.layers())


def test_kept_within_the_cap(float32_model):
    lm = float32_model("llama")
    enc = tiny.encoded(n=9, seed=4)
    layers = lm.layers
    one = 9 * layers[0].mlp.gate_proj.out_features * 4  # one layer's gate (or up) pre-activation, bytes
    # the option explain_cache_bytes caps them: the first layer's gate and up, then the second's gate
    s = normviz.Session.from_encoded(lm, [enc], options={"explain_cache_bytes": 3 * one})[0]
    e = s.explain(position=6)
    recs = [v.rec for v in s.layers()]
    assert recs[0].ff_a is not None and recs[0].ff_b is not None
    assert recs[1].ff_a is not None and recs[1].ff_b is None  # its up was not kept: recomputed
    assert all(r.ff_a is None for r in recs[2:])
    got = e.sources
    assert all(r.ff_a is None and r.ff_b is None for r in recs)  # the second layer's gate dropped unused
    plain = normviz.Session.from_encoded(lm, [enc])[0]
    plain.layers()
    want = plain.explain(position=6).sources
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_kept_and_cached_together_within_the_cap(float32_model):
    """The pre-activations still held count against the FF factors' cache (explain_cache_bytes): with room for one
    layer's gate and up, the first layer's are kept; the backward pass (top layer first) does not cache the top
    layer's factors while they are held, then caches the first layer's as it reads them."""
    from normviz.attribution import frozen

    lm = float32_model("llama")
    enc = tiny.encoded(n=9, seed=4)
    one = 9 * lm.layers[0].mlp.gate_proj.out_features * 4
    s = normviz.Session.from_encoded(lm, [enc], options={"explain_cache_bytes": 2 * one})[0]
    e = s.explain(position=6)
    recs = [v.rec for v in s.layers()]
    assert [r.ff_a is not None for r in recs] == [True] + [False] * (len(recs) - 1)
    e.sources
    cache = frozen(s)
    assert [k[1] for k in cache._factors] == [0] and cache._bytes == 2 * one
