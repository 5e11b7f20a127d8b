"""Issue 39: a whole continuation explained (``Session.explain_continuation``) from one recording pass and one
batched adjoint pass. On tiny float64 models of every decoder the attribution supports and every encoder–decoder:
greedy ids equal transformers' own ``generate(do_sample=False)``; each row equals a one-position ``explain`` of
that step on exactly those ids; each row + its bias is the model's own logit (difference) from its own forward
pass; teacher-forced continuations likewise; smollm2 in float32."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.attribution import adjoint, continuation
from normviz.core.errors import InputError, NotApplicableError

from ..helpers import tiny

DECODERS = ["llama", "llama_bias", "qwen2", "gpt2"]  # the attribution's decoder list (tests/attribution/test_adjoint)
SEQ2SEQ = ["marian", "bart", "mbart", "m2m_100", "t5"]
EXACT = 1e-10
# the model's own rounding: Llama/Qwen2 (and T5) RMSNorms compute in float32 even in a float64 model
OWN = {"llama": 2e-6, "llama_bias": 2e-6, "qwen2": 2e-6, "t5": 2e-6}


def _foil(c, t):
    return None if c.foils[t] < 0 else int(c.foils[t])


def _scale(x) -> float:
    return float(np.nanmax(np.abs(x)))


def _rows_equal_explain(c, session, stack_n_source=0, by_layer=True):
    """Every row against ``session.explain`` of its step (``session``: exactly the continuation's ids)."""
    for t in range(len(c)):
        e = session.explain(token=int(c.generated_ids[t]), foil=_foil(c, t), position=int(c.positions[t]))
        k = stack_n_source + int(c.positions[t]) + 1  # the columns the step reads
        sc = _scale(e.sources)
        assert np.abs(c.sources[t, :k] - e.sources[:k]).max() <= EXACT * sc, (t, c.sources[t, :k], e.sources[:k])
        assert np.isnan(c.sources[t, k:]).all() and not np.isnan(c.sources[t, :k]).any()
        assert abs(c.bias[t] - e.bias) <= EXACT * max(sc, abs(e.bias))
        assert abs(c.totals[t] - e.total) <= EXACT * abs(e.total)
        assert c.generated_ids[t] == e.token and (c.foils[t] == -1) == (e.foil is None)
        if by_layer:
            assert np.abs(c.sources_by_layer[t][:, :k] - e.sources_by_layer[:, :k]).max() <= EXACT * sc
            assert np.abs(c.bias_by_layer[t] - e.bias_by_layer).max() <= EXACT * max(sc, 1.0)
        if e.has_direct:
            assert np.abs(c.heads[t] - e.heads.sum(-1)).max() <= EXACT * sc
            assert np.abs(c.ff[t] - e.ff).max() <= EXACT * sc
            assert np.abs(c.attn_bias[t] - e.attn_bias).max() <= EXACT * sc
            assert abs(c.embedding[t] - e.embedding) <= EXACT * sc and abs(c.final_bias[t] - e.final_bias) <= EXACT * sc
            if c.cross_heads is not None:
                assert np.abs(c.cross_heads[t] - e.cross_heads.sum(-1)).max() <= EXACT * sc
        else:
            assert c.heads is None and c.direct_refusal == e.direct_refusal


def _own_logits(lm, ids) -> torch.Tensor:
    with torch.no_grad():
        return lm.head_model(torch.tensor([list(ids)])).logits[0].to(torch.float64)


def _sums_to_the_models_logits(c, logits, tol):
    for t in range(len(c)):
        row = logits[int(c.positions[t])]
        want = float(row[int(c.generated_ids[t])] - (row[_foil(c, t)] if _foil(c, t) is not None else 0.0))
        sc = max(_scale(c.sources[t]), abs(want))
        assert abs(c.totals[t] - want) <= 1e-12 * sc
        got = np.nansum(c.sources[t]) + c.bias[t]
        assert abs(got - want) <= tol * sc, (t, got, want)
        if c.heads is not None:
            direct = c.embedding[t] + c.heads[t].sum() + c.attn_bias[t].sum() + c.ff[t].sum() + c.final_bias[t]
            if c.cross_heads is not None:
                direct += c.cross_heads[t].sum() + c.cross_bias[t].sum()
            assert abs(direct - want) <= max(tol, 1e-7) * sc, (t, direct, want)


# ---------------------------------------------------------------- decoders
@pytest.mark.parametrize("arch", DECODERS)
@pytest.mark.parametrize("foil", [None, 11, "runner-up"])
def test_greedy_rows_equal_one_position_explain(head_model, arch, foil):
    lm = head_model(arch)
    prompt = tiny.encoded(n=6, seed=5)
    s = normviz.Session.from_encoded(lm, [prompt])[0]
    c = s.explain_continuation(max_new_tokens=5, foil=foil, by_layer=True)
    # greedy: transformers' own generate, with its KV cache
    want = lm.head_model.generate(torch.tensor([prompt.ids]), max_new_tokens=5, do_sample=False)[0, 6:].tolist()
    assert c.generated_ids.tolist() == want and c.mode == "greedy"
    T, N = len(c), 6 + len(c) - 1
    assert c.sources.shape == (T, N) and c.bias.shape == (T,) and c.positions.tolist() == list(range(5, 5 + T))
    assert c.column_ids.tolist() == prompt.ids + want[:-1]
    L, H = len(s.layers()), lm.n_heads
    assert c.heads.shape == (T, L, H) and c.ff.shape == (T, L) and c.sources_by_layer.shape == (T, L + 1, N)
    # each greedy step is the argmax of the recorded pass (float64: no near-ties here)
    logits = _own_logits(lm, c.column_ids)
    assert [int(logits[i].argmax()) for i in c.positions] == want
    if foil == "runner-up":
        for t in range(T):
            row = logits[int(c.positions[t])].clone()
            row[want[t]] = -np.inf
            assert c.foils[t] == int(row.argmax())
    full = normviz.Session.from_encoded(lm, [tiny.from_ids(c.column_ids.tolist())])[0]
    _rows_equal_explain(c, full)
    _sums_to_the_models_logits(c, logits, OWN.get(arch, 1e-9))


@pytest.mark.parametrize("arch", DECODERS)
def test_rows_equal_explain_of_each_prefix(head_model, arch):
    """Row t = ``explain`` on the prompt + the first t generated tokens alone (its own recording pass): the
    causal model's rows ≤ i do not depend on later tokens. GPT-2 to 1e-10; Llama/Qwen2's own float32 RMSNorm
    makes the model's logits differ between the two passes (measured here, a few 1e-7), which bounds them."""
    lm = head_model(arch)
    prompt = tiny.encoded(n=5, seed=2)
    c = normviz.Session.from_encoded(lm, [prompt])[0].explain_continuation(4, foil=7)
    ids = c.column_ids.tolist()
    full_logits = _own_logits(lm, ids)
    for t in range(len(c)):
        k = 5 + t
        e = normviz.Session.from_encoded(lm, [tiny.from_ids(ids[:k])])[0].explain(token=int(c.generated_ids[t]), foil=7)
        own = float((_own_logits(lm, ids[:k])[-1] - full_logits[k - 1]).abs().max() / full_logits[k - 1].abs().max())
        tol = EXACT if arch == "gpt2" else max(EXACT, 100 * own)
        if arch == "gpt2":
            assert own <= 1e-14
        sc = _scale(e.sources)
        assert np.abs(c.sources[t, :k] - e.sources).max() <= tol * sc, (t, own)
        assert abs(c.totals[t] - e.total) <= tol * max(sc, abs(e.total))


@pytest.mark.parametrize("arch", DECODERS)
def test_teacher_forced_continuation(head_model, arch):
    lm = head_model(arch)
    prompt = tiny.encoded(n=5, seed=3)
    given = [40, 41, 42, 17, 5, 88]
    s = normviz.Session.from_encoded(lm, [prompt])[0]
    c = s.explain_continuation(continuation=given, foil="runner-up", by_layer=True)
    assert c.mode == "given" and c.generated_ids.tolist() == given
    assert c.column_ids.tolist() == prompt.ids + given[:-1] and c.sources.shape == (6, 10)
    full = normviz.Session.from_encoded(lm, [tiny.from_ids(c.column_ids.tolist())])[0]
    _rows_equal_explain(c, full)
    _sums_to_the_models_logits(c, _own_logits(lm, c.column_ids), OWN.get(arch, 1e-9))
    one = s.explain_continuation(continuation=[40])  # one step: the prompt's own next-token logit
    assert one.sources.shape == (1, 5) and abs(one.totals[0] - s.explain(token=40).total) <= 1e-12 * abs(one.totals[0])


def test_one_recording_one_backward_pass_factors_shared(head_model, monkeypatch):
    lm = head_model("qwen2")
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=6, seed=4)])[0]
    factors, passes = [], []
    real_f, real_b = adjoint.factors_of, continuation.stack_backward
    monkeypatch.setattr(adjoint, "factors_of", lambda *a, **k: factors.append(1) or real_f(*a, **k))
    monkeypatch.setattr(continuation, "stack_backward", lambda *a, **k: passes.append(a[1].shape) or real_b(*a, **k))
    sessions = []
    real_from = normviz.Session.from_encoded.__func__
    monkeypatch.setattr(
        normviz.Session,
        "from_encoded",
        classmethod(lambda cls, *a, **k: sessions.extend(real_from(cls, *a, **k)) or sessions[-1:]),
    )
    c = s.explain_continuation(6)
    assert len(passes) == 1 and passes[0][0] == len(c)  # one pass, all T targets in its batch
    assert len(factors) == len(s.layers())  # each layer's FF factors computed once, for every step
    assert len(sessions) == 1 and sessions[0].forward_passes == 1 and c.batches == 1


def test_groups_when_the_batch_does_not_fit_give_the_same_numbers(head_model):
    lm = head_model("llama_bias")
    prompt = tiny.encoded(n=7, seed=6)
    whole = normviz.Session.from_encoded(lm, [prompt])[0].explain_continuation(6, foil="runner-up", by_layer=True)
    n = 7 + len(whole) - 1
    request = normviz.session.session.request_for(lm, n)
    d, d_ff, size = request.d_model, request.d_ff, 8
    per = n * (8 * d + 6 * d_ff) * size
    limit = 3 * n * d_ff * 8 + adjoint.ALPHA_BLOCK_BYTES + 2 * per  # two targets per pass
    s = normviz.Session.from_encoded(lm, [prompt], options={"explain_max_bytes": limit})[0]
    split = s.explain_continuation(6, foil="runner-up", by_layer=True)
    assert split.batches == 3 and whole.batches == 1
    assert np.array_equal(np.isnan(split.sources), np.isnan(whole.sources))
    sc = _scale(whole.sources)
    assert np.nanmax(np.abs(split.sources - whole.sources)) <= 1e-13 * sc
    assert np.nanmax(np.abs(split.sources_by_layer - whole.sources_by_layer)) <= 1e-13 * sc


def test_streamed_alpha_gives_the_recorded_alpha_numbers(head_model, monkeypatch):
    lm = head_model("llama")
    prompt = tiny.encoded(n=9, seed=3)
    a = normviz.Session.from_encoded(lm, [prompt])[0].explain_continuation(4, foil=4)
    s = normviz.Session.from_encoded(lm, [prompt], options={"record_attention": "qk"})[0]
    monkeypatch.setattr(adjoint, "ALPHA_BLOCK_BYTES", 4 * 12 * 8 * 3)
    b = s.explain_continuation(4, foil=4)
    assert a.generated_ids.tolist() == b.generated_ids.tolist()
    sc = _scale(a.sources)
    assert np.nanmax(np.abs(a.sources - b.sources)) <= 1e-12 * sc
    assert np.abs(a.heads - b.heads).max() <= 1e-12 * sc


def test_a_foil_equal_to_a_step_gives_a_zero_row(head_model):
    lm = head_model("gpt2")
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=5, seed=1)])[0]
    c = s.explain_continuation(continuation=[30, 31, 30], foil=30)
    assert c.totals[0] == 0 and c.totals[2] == 0 and c.totals[1] != 0
    assert np.nanmax(np.abs(c.sources[0])) == 0 and c.bias[0] == 0


def test_not_a_decoder_and_bad_arguments(head_model):
    bert = head_model("bert")
    s = normviz.Session.from_encoded(bert, [tiny.encoded(n=5)])[0]
    with pytest.raises(NotApplicableError, match="not a decoder"):
        s.explain_continuation(3)
    lm = head_model("gpt2")
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=5)])[0]
    with pytest.raises(InputError, match="max_new_tokens"):
        s.explain_continuation(0)
    with pytest.raises(InputError, match="not both"):
        s.explain_continuation(3, continuation=[4])
    with pytest.raises(InputError, match="window"):
        s.explain_continuation(continuation=list(range(3, 90)))


def test_json_and_npz_fields(head_model, tmp_path):
    import json

    lm = head_model("gpt2")
    c = normviz.Session.from_encoded(lm, [tiny.encoded(n=5)])[0].explain_continuation(3, foil="runner-up")
    d = json.loads(c.to_json())
    assert d["generated_ids"] == c.generated_ids.tolist() and d["foil_mode"] == "runner-up"
    assert d["sources"][0][-1] is None and d["sources"][-1][-1] == pytest.approx(c.sources[-1, -1], rel=1e-15)
    np.savez(tmp_path / "c.npz", **c.to_dict())
    z = np.load(tmp_path / "c.npz")
    assert np.array_equal(z["sources"], c.sources, equal_nan=True) and z["heads"].shape == c.heads.shape


# ---------------------------------------------------------------- encoder–decoders
@pytest.mark.parametrize("arch", SEQ2SEQ)
@pytest.mark.parametrize("mode", ["greedy", "given", "session"])
def test_seq2seq_rows_equal_one_position_explain(seq2seq_model, arch, mode):
    lm = seq2seq_model(arch)
    s = normviz.Session(lm, "the cat sat on the mat", target="le chat")
    kw = {"greedy": dict(max_new_tokens=6), "given": dict(continuation="le chat assis sur le tapis"), "session": {}}[
        mode
    ]
    c = s.explain_continuation(**kw, foil="runner-up" if mode == "given" else 5, by_layer=True)
    n_src = len(s.src_tokens)
    assert c.n_source == n_src and c.mode == mode
    src = torch.tensor([s.encoded.ids])
    tgt_ids = c.column_ids[n_src:].tolist()
    if mode == "greedy":  # transformers' own greedy generate
        use_cache = arch != "t5" or lm.model.config.num_decoder_layers == lm.model.config.num_layers
        seq = lm.model.generate(
            input_ids=src,
            attention_mask=torch.ones_like(src),
            max_new_tokens=6,
            do_sample=False,
            num_beams=1,
            use_cache=use_cache,
            forced_eos_token_id=None,
        )[0].tolist()
        assert c.generated_ids.tolist() == seq[1:] and tgt_ids == seq[:-1]
    elif mode == "session":
        assert c.generated_ids.tolist() == s.part.seq2seq.labels.ids
    else:
        assert lm.tokenizer.decode(c.generated_ids.tolist(), skip_special_tokens=True) == "le chat assis sur le tapis"
    assert c.sources.shape == (len(c), n_src + len(tgt_ids))
    inner = normviz.Session.from_ids(lm, s.encoded.ids, tgt_ids, out_ids=c.generated_ids.tolist())
    _rows_equal_explain(c, inner, n_src)
    with torch.no_grad():
        logits = lm.model(input_ids=src, decoder_input_ids=torch.tensor([tgt_ids])).logits[0].to(torch.float64)
    for t in range(len(c)):  # each row over source + earlier target tokens, + its bias = the model's own logit
        f = _foil(c, t)
        want = float(logits[t, int(c.generated_ids[t])] - logits[t, f])
        sc = max(_scale(c.sources[t]), abs(want))
        assert abs(np.nansum(c.sources[t]) + c.bias[t] - want) <= OWN.get(arch, 1e-9) * sc
        assert np.abs(c.sources[t, :n_src]).max() > 0  # the source takes part


# ---------------------------------------------------------------- smollm2, float32
def test_smollm2_rows_equal_the_one_position_path(smollm2):
    s = normviz.Session(smollm2, "The capital of France is")
    c = s.explain_continuation(max_new_tokens=6, foil="runner-up")
    x = torch.tensor([s.encoded.ids])
    with torch.no_grad():
        want = smollm2.head_model.generate(
            input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=6, do_sample=False
        )[0, x.shape[1] :].tolist()
    assert c.generated_ids.tolist() == want and c.text.startswith(" Paris")
    full = normviz.Session.from_encoded(smollm2, [continuation._encoded(smollm2, c.column_ids.tolist())])[0]
    for t in range(len(c)):
        e = full.explain(token=int(c.generated_ids[t]), foil=int(c.foils[t]), position=int(c.positions[t]))
        k = int(c.positions[t]) + 1
        sc = _scale(e.sources)
        assert np.abs(c.sources[t, :k] - e.sources[:k]).max() <= 1e-4 * sc
        assert np.abs(c.heads[t] - e.heads.sum(-1)).max() <= 1e-4 * sc
        assert abs(np.nansum(c.sources[t]) + c.bias[t] - c.totals[t]) <= 1e-4 * max(sc, abs(c.totals[t]))
    # a known answer, given as text, teacher-forced
    g = s.explain_continuation(continuation=" Paris, the city of light")
    assert smollm2.tokenizer.decode(g.generated_ids.tolist()) == " Paris, the city of light" and g.mode == "given"
    e = s.explain(token=" Paris")  # step 0 is the prompt's own next-token logit: the prompt's session
    assert g.tokens[0] == " Paris" and np.abs(g.sources[0, :5] - e.sources).max() <= 1e-4 * _scale(e.sources)


@pytest.mark.parametrize("arch", ["gpt_neox", "phi", "gemma2", "gemma3_text", "olmo2"])
def test_round_five_architectures_equal_explain(arch):
    """The batched adjoint follows layer_adjoint's parts on the round-5 rows: parallel blocks (gpt_neox, phi),
    norms after a sublayer (olmo2, gemma), Gemma 2's final soft-cap (the capped logit) — every step equals a
    one-position explain on the same ids, and row + bias is the step's total (float32 norms: 1e-5)."""
    from tests.helpers.tiny import build_with_head
    from tools.tiny import encoded

    lm = build_with_head(arch)
    enc = encoded(8)
    s = normviz.Session.from_encoded(lm, [enc])[0]
    c = s.explain_continuation(continuation=[5, 7, 9])
    scale = max(1.0, float(np.abs(c.totals).max()))
    assert np.abs(np.nansum(c.sources, 1) + c.bias - c.totals).max() <= 1e-5 * scale
    ids = list(enc.ids)
    for t, w in enumerate([5, 7, 9]):
        one = normviz.Session.from_encoded(
            lm,
            [
                type(enc)(
                    ids=ids + [5, 7][:t],
                    tokens=[""] * (8 + t),
                    labels=[""] * (8 + t),
                    special=[False] * (8 + t),
                    dropped=0,
                )
            ],
        )[0]
        e = one.explain(token=w, position=-1)
        assert abs(c.totals[t] - e.total) <= 1e-10 * scale
        np.testing.assert_allclose(c.sources[t, : 8 + t], e.sources, rtol=0, atol=1e-10 * scale)
