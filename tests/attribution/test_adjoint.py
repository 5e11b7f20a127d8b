"""Issue 30: ``sources`` by one backward pass through the frozen-coefficient network (normviz.attribution.adjoint)
against today's forward propagation of every token's part (normviz.attribution.propagate, kept as the reference),
on tiny float64 models of every architecture the attribution supports; ``sources_by_layer``'s row identities;
the bias part computed directly; a long input's α streamed; the per-text cache."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.attribution import adjoint, propagate, readout_of
from normviz.attribution import seq2seq as encdec_explain

from ..helpers import tiny

ARCHS = ["llama", "llama_bias", "qwen2", "gpt2", "bert"]  # llama, qwen2: GQA (4 heads, 2 kv heads); bert: MLM head
SEQ2SEQ = ["marian", "bart", "mbart", "m2m_100", "t5"]
EXACT = 1e-10


def _forward(session, e):
    """(sources, bias) by the forward propagation of the parts [n, n+1, d] (the reference)."""
    readout = readout_of(session.lm)
    X = propagate.output_parts(session.layers())
    t = session.layers()[-1].rec.out[e.position]
    u, b = readout.direction(e.token, e.foil)
    s, bias = propagate.source_logits(X[e.position], readout, t, u, b)
    return s.numpy(), bias


def _rows_add_up(e, tol):
    L1 = e.sources_by_layer.shape[0]
    assert e.bias_by_layer.shape == (L1,)
    for l in range(L1):
        got = e.sources_by_layer[l].sum() + e.bias_by_layer[l:].sum()
        assert abs(got - e.total) <= tol * abs(e.total), (l, got, e.total)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("foil", [None, 11])
def test_adjoint_equals_the_forward_propagation(head_model, arch, foil):
    lm = head_model(arch)
    enc = tiny.encoded(n=8, seed=5)
    s = normviz.Session.from_encoded(lm, [enc])[0]
    e = s.explain(foil=foil, position=5)
    want, want_bias = _forward(s, e)
    scale = np.abs(want).max()
    assert np.abs(e.sources - want).max() <= EXACT * scale, (arch, np.abs(e.sources - want).max() / scale)
    assert abs(e.bias - want_bias) <= EXACT * max(scale, abs(want_bias))  # directly, in the same pass
    assert e.bias == e.bias_by_layer.sum()
    assert abs((e.total - e.sources.sum()) - want_bias) <= 2e-6 * max(scale, 1.0)  # the model's own rounding
    assert s.forward_passes == 1


@pytest.mark.parametrize("arch", ARCHS)
def test_sources_by_layer_rows(head_model, arch):
    lm = head_model(arch)
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=9, seed=2)])[0]
    i = 6
    e = s.explain(foil=3, position=i)
    by = e.sources_by_layer
    L = len(s.layers())
    assert by.shape == (L + 1, 9)
    assert np.array_equal(by[0], e.sources)
    assert np.count_nonzero(by[-1]) == 1 and by[-1, i] != 0  # the output: only the explained position
    if lm.spec.causal:
        assert np.abs(by[:, i + 1 :]).max() == 0
    tol = 2e-6 if arch in ("llama", "llama_bias", "qwen2") else 1e-9  # RMSNorm rounds through float32
    _rows_add_up(e, tol)
    # row L + the readout's constant is the model's own logit difference, read from its final state
    assert abs(by[-1].sum() + e.bias_by_layer[-1] - e.total) <= tol * abs(e.total)


@pytest.mark.parametrize("arch", ["llama_bias", "gpt2"])
def test_the_bias_part_is_the_biases(head_model, arch):
    """Models with biases in their layers: the biases' part computed directly completes Σ sources to the
    model's own logit (Llama: up to its RMSNorm's float32 rounding)."""
    lm = head_model(arch)
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=7, seed=1)])[0]
    e = s.explain(position=4)
    assert np.abs(e.bias_by_layer[:-1]).max() > 0  # this model has biases in its layers
    tol = 2e-6 if arch == "llama_bias" else 1e-9
    assert abs(e.bias_by_layer.sum() + e.sources.sum() - e.total) <= tol * abs(e.total)


@pytest.mark.parametrize("arch", SEQ2SEQ)
def test_seq2seq_adjoint_equals_the_forward_propagation(seq2seq_model, arch):
    lm = seq2seq_model(arch)
    s = normviz.Session(lm, "the cat sat on the mat", target="le chat assis sur le tapis")
    r, foil = 3, 5
    e = s.explain(foil=foil, position=r)
    dec = encdec_explain.decoder_view(lm)
    readout = readout_of(dec)
    X = encdec_explain.output_parts(s)
    u, b = readout.direction(e.token, foil)
    want, want_bias = propagate.source_logits(X[r], readout, s.layers("decoder")[-1].rec.out[r], u, b)
    want = want.numpy()
    scale = np.abs(want).max()
    assert np.abs(e.sources - want).max() <= EXACT * scale, (arch, np.abs(e.sources - want).max() / scale)
    direct_bias = e.bias_by_layer.sum() + e.encoder_bias
    assert abs(direct_bias - want_bias) <= EXACT * max(scale, abs(want_bias))
    n_src = e.n_source
    L = len(s.layers("decoder"))
    by = e.sources_by_layer
    assert by.shape == (L + 1, len(e.sources))
    assert np.array_equal(by[0, n_src:], e.sources[n_src:])  # the target tokens' row 0 is their sources
    assert np.abs(by[-1, :n_src]).max() == 0 and np.count_nonzero(by[-1, n_src:]) == 1
    _rows_add_up(e, 2e-6 if arch == "t5" else 1e-9)


def test_long_input_streams_alpha(head_model, monkeypatch):
    """A session that records q, k (α recomputed in blocks of rows, never whole) gives the recorded-α numbers."""
    from normviz.record.attention_capture import AttentionInputs

    lm = head_model("llama")
    enc = tiny.encoded(n=12, seed=3)
    a = normviz.Session.from_encoded(lm, [enc])[0].explain(foil=4, position=9)
    s = normviz.Session.from_encoded(lm, [enc], options={"record_attention": "qk"})[0]
    assert s.layers()[0].rec.attn is None
    monkeypatch.setattr(adjoint, "ALPHA_BLOCK_BYTES", 4 * 12 * 8 * 3)  # three rows per block
    seen = []
    real = AttentionInputs.blocks
    monkeypatch.setattr(AttentionInputs, "blocks", lambda self, bb=None: seen.append(bb) or real(self, bb))
    e = s.explain(foil=4, position=9)
    scale = np.abs(a.sources).max()
    assert np.abs(a.sources - e.sources).max() <= 1e-12 * scale
    assert np.abs(a.sources_by_layer - e.sources_by_layer).max() <= 1e-12 * scale
    assert seen.count(4 * 12 * 8 * 3) == len(s.layers())  # every layer's α streamed in blocks


def test_a_new_candidate_reuses_the_texts_factors(head_model, monkeypatch):
    lm = head_model("qwen2")
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=8, seed=4)])[0]
    calls = []
    real = adjoint.factors_of
    monkeypatch.setattr(adjoint, "factors_of", lambda *a, **k: calls.append(1) or real(*a, **k))
    s.explain().sources
    first = len(calls)
    assert first == len(s.layers())
    s.explain(token=7, foil=2, position=3).sources
    assert len(calls) == first  # one backward pass, no factor recomputed


def test_the_cost_check_says_the_size_it_needs(head_model):
    lm = head_model("gpt2")
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=9)], options={"explain_max_bytes": 100})[0]
    with pytest.raises(normviz.core.errors.TooCostlyError, match=r"needs about \d+ MiB"):
        s.explain().sources
    need = adjoint.memory_bytes(normviz.session.session.request_for(lm, 4096))
    assert need < 1 * 2**30  # 4,096 tokens fit the default limit


def test_smollm2_float32_adjoint_equals_the_forward_propagation(smollm2):
    s = normviz.Session(smollm2, "The capital of France is")
    e = s.explain(token=" Paris", foil=" London")
    want, want_bias = _forward(s, e)
    assert np.abs(e.sources - want).max() <= 1e-4 * np.abs(want).max()
    assert e.bias == 0.0 and want_bias == 0.0
    assert abs(e.sources.sum() - e.total) <= 1e-4 * abs(e.total)
    _rows_add_up(e, 1e-4)
