"""Issue 29: predict, logit_lens and explain on bfloat16 / float16 models (they crashed in the LM head: a float32
state into a half-precision Linear). Each is computed in float32 from the upcast records, as the maps are
(DESIGN.md "Long inputs"), and compared with the same computation on a float32 twin holding the very same
weights: the differences left are the half-precision forward pass's own rounding.

Tolerances (relative to the largest |logit| at the position; measured on these tiny models: bfloat16 ≤ 0.9 %,
float16 ≤ 0.1 %): logits, totals and every part within 3 % (bfloat16) / 0.5 % (float16); the parts sum to the
total within 1 % / 0.2 % (the half-precision pass rounds each write, the float32 parts do not); the logit lens's
log-probabilities within 0.25 / 0.05 nats.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import normviz

from ..helpers import seq2seq, tiny

TOL = {torch.bfloat16: dict(value=3e-2, total=1e-2, lens=0.25), torch.float16: dict(value=5e-3, total=2e-3, lens=0.05)}


@pytest.fixture(scope="module")
def pair():
    cache: dict = {}

    def make(arch, dtype):
        if (arch, dtype) not in cache:
            lm = tiny.build_with_head(arch, dtype=dtype)
            twin = normviz.from_model(copy.deepcopy(lm.head_model).float(), None, name=f"{lm.name}-float32")
            cache[arch, dtype] = lm, twin
        return cache[arch, dtype]

    return make


def _sessions(lm, twin):
    enc = tiny.encoded(n=9, seed=4)
    return tuple(normviz.Session.from_encoded(m, [enc])[0] for m in (lm, twin))


def _direct_sum(e) -> float:
    return e.embedding + e.heads.sum() + e.attn_bias.sum() + e.ff.sum() + e.final_bias


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("arch", ["llama", "gpt2", "bert"])
def test_half_precision_models_predict_explain_and_lens_like_float32(pair, arch, dtype):
    lm, twin = pair(arch, dtype)
    assert lm.head_model.get_output_embeddings().weight.dtype == dtype
    half, full = _sessions(lm, twin)
    tol, pos = TOL[dtype], 6
    V = lm.head_model.get_output_embeddings().weight.shape[0]
    want = {c.id: c.logit for c in full.predict(top=V, position=pos)}
    got = {c.id: c.logit for c in half.predict(top=V, position=pos)}
    scale = max(abs(v) for v in want.values())
    assert set(got) == set(want)
    assert max(abs(got[k] - want[k]) for k in want) <= tol["value"] * scale
    top = half.predict(top=3, position=pos)
    assert len(top) == 3 and sum(c.prob for c in half.predict(top=V, position=pos)) == pytest.approx(1, abs=1e-6)

    lens_h, lens_f = half.logit_lens(position=pos), full.logit_lens(position=pos)
    assert lens_h.shape == lens_f.shape == (lm.n_layers + 1, V) and np.isfinite(lens_h).all()
    assert np.abs(lens_h - lens_f).max() <= tol["lens"]

    for foil in (None, 7):
        token = max(want, key=want.get) if foil != max(want, key=want.get) else 8
        eh, ef = half.explain(token=token, foil=foil, position=pos), full.explain(token=token, foil=foil, position=pos)
        assert abs(eh.total - ef.total) <= tol["value"] * scale
        assert abs(float(eh.sources.sum()) + eh.bias - eh.total) <= tol["total"] * scale
        assert np.abs(eh.sources - ef.sources).max() <= tol["value"] * scale
        assert eh.has_direct == ef.has_direct == (arch != "bert")
        if eh.has_direct:
            assert abs(_direct_sum(eh) - eh.total) <= tol["total"] * scale
            assert abs(_direct_sum(ef) - ef.total) <= 1e-5 * scale  # the float32 twin: exact to its rounding
            for name in ("heads", "attn_bias", "ff"):
                assert np.abs(getattr(eh, name) - getattr(ef, name)).max() <= tol["value"] * scale, name


def test_half_precision_readout_upcasts_w_u_in_chunks(pair, monkeypatch):
    """The vocabulary is read out a slice at a time (never one whole float32 copy of W_U), with the same
    logits as in one piece."""
    from normviz.attribution import readout as ro

    lm, _ = pair("llama", torch.bfloat16)
    half, _ = _sessions(*pair("llama", torch.bfloat16))
    whole = [c.logit for c in half.predict(top=5)]
    monkeypatch.setattr(ro, "CHUNK_BYTES", 7 * lm.config.hidden_size * 4)  # 7 rows of W_U per slice
    assert [c.logit for c in half.predict(top=5)] == whole


# ---------------------------------------------------------------- encoder–decoders (their cross blocks upcast too)
SEQ2SEQ = ["marian", "bart", "t5", "mbart"]  # post-LN (Marian, BART) and pre-LN (T5, mBART: cross_heads)
# Two stacks round twice as often. Measured maxima (relative to the largest |logit|): bfloat16 logits 1.8 %,
# sources (incl. sources_by_layer, T5) 4.3 %, Σ sources + bias − total 0.7 %, lens 0.10 nats; float16 0.52 %,
# 0.39 %, 0.08 %, 0.04 nats. Bounds ≈ 1.5–2× those.
SEQ2SEQ_TOL = {
    torch.bfloat16: dict(value=6e-2, total=1.5e-2, lens=0.2),
    torch.float16: dict(value=1e-2, total=2e-3, lens=0.08),
}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("arch", SEQ2SEQ)
def test_half_precision_encoder_decoders_predict_explain_and_lens_like_float32(arch, dtype):
    """sources crashed in the cross blocks (a float32 state into their half-precision weights and norms,
    ``attribution/seq2seq``); every quantity now comes from float32 upcast copies, as the decoder-only ones."""
    lm = seq2seq.build(arch, dtype=dtype)
    twin = normviz.from_model(copy.deepcopy(lm.model).float(), lm.tokenizer, name=f"{lm.name}-float32")
    assert lm.model.get_output_embeddings().weight.dtype == dtype
    text, target = "the cat sat on the mat", "le chat assis sur le tapis"
    half, full = (normviz.Session(m, text, target=target) for m in (lm, twin))
    tol, pos = SEQ2SEQ_TOL[dtype], 3
    V = lm.model.get_output_embeddings().weight.shape[0]
    want = {c.id: c.logit for c in full.predict(top=V, position=pos)}
    got = {c.id: c.logit for c in half.predict(top=V, position=pos)}
    scale = max(abs(v) for v in want.values())
    assert set(got) == set(want) and max(abs(got[k] - want[k]) for k in want) <= tol["value"] * scale
    lens_h, lens_f = half.logit_lens(position=pos), full.logit_lens(position=pos)
    assert lens_h.shape == lens_f.shape and np.isfinite(lens_h).all()
    assert np.abs(lens_h - lens_f).max() <= tol["lens"]
    ranked = sorted(want, key=want.get, reverse=True)
    for token, foil in ((ranked[0], None), (ranked[0], ranked[1])):
        eh, ef = half.explain(token=token, foil=foil, position=pos), full.explain(token=token, foil=foil, position=pos)
        assert abs(eh.total - ef.total) <= tol["value"] * scale
        assert eh.sources.shape == ef.sources.shape == (len(half.src_tokens) + len(half.tgt_tokens),)
        assert abs(float(eh.sources.sum()) + eh.bias - eh.total) <= tol["total"] * scale
        assert np.abs(eh.sources - ef.sources).max() <= tol["value"] * scale
        assert np.abs(eh.sources_by_layer - ef.sources_by_layer).max() <= tol["value"] * scale
        if lm.spec.decoder.placement == "pre":
            for name in ("heads", "cross_heads", "cross_bias", "ff"):
                assert np.abs(getattr(eh, name) - getattr(ef, name)).max() <= tol["value"] * scale, name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("arch", ["marian", "t5"])
def test_half_precision_cross_maps_are_float32_like_the_twin(arch, dtype):
    """The cross family crashed on half-precision models (a bfloat16 map into numpy; a float32 value into a
    half W^O). Its maps are now float32, within the model's own α rounding of the float32 twin's (measured:
    bfloat16 ≤ 8.9 % of the largest value, the α itself; float16 ≤ 1.9 %)."""
    lm = seq2seq.build(arch, dtype=dtype)
    twin = normviz.from_model(copy.deepcopy(lm.model).float(), lm.tokenizer, name=f"{lm.name}-float32")
    text, target = "the cat sat on the mat", "le chat assis sur le tapis"
    half, full = (normviz.Session(m, text, target=target) for m in (lm, twin))
    bound = 0.15 if dtype == torch.bfloat16 else 0.04
    for key in ("cross_attention", "cross_norm", "cross_norm_layer", "cross_source_share"):
        got, want = np.asarray(half.get(key)[key]), np.asarray(full.get(key)[key])
        assert got.dtype == np.float32 and got.shape == want.shape and np.isfinite(got).all(), key
        assert np.abs(got - want).max() <= bound * np.abs(want).max(), key
