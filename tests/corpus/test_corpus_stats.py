"""Corpus statistics against straightforward, independent computations on tiny models (float64).

The reference recomputes every statistic per sentence with plain loops and scipy.stats.spearmanr, from
maps of one unpadded sentence at a time and ‖f(x)‖ from the model's own value projection (tests/vectors.py),
while the corpus engine runs padded batches, vectorised sums and chunk merges.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from scipy.stats import spearmanr

import normviz
from normviz.core.tokens import encode
from normviz.corpus.chunks import batch_maps, process_chunk
from normviz.corpus.results import tables
from normviz.corpus.stats import CATEGORIES, STATISTICS, categorize, merge, rowwise_spearman

from ..helpers.corpus import sample_lines
from ..helpers.vectors import independent_head_vectors, model_vectors

LINES = sample_lines(5, start=3) + ["Short one, here.\tAnd a second sentence, as a pair."]


def _category(j, label, special):
    if j == 0:
        return "start"
    if special:
        return "sep"
    return {".": "period", ",": "comma"}.get(label.strip(), "other")


def reference(lm, lines):
    """Every statistic computed the obvious way, sentence by sentence."""
    L, H = lm.n_layers, lm.n_heads
    causal = lm.spec.placement == "pre"
    after = ["ff", "ff_res"] + (["ff_res_ln"] if not causal else [])
    cv, rho_af, share_w, share_n = [], [], [], []
    mix = {k: [] for k in ("attention", "norm_layer", "attn_res", "attn_res_ln", *after)}
    mix_head = {"attention": [], "norm": []}
    ffc = {k: [] for k in after}
    occurrences = []
    fx_all = []
    for line in lines:
        text, pair = (line.split("\t") + [None])[:2]
        a = normviz.analyze(lm, text, pair, methods=["all"])
        ids = a.token_ids
        n = len(ids)
        mv = model_vectors(lm, ids, encode(lm.tokenizer, text, pair).token_type_ids)  # a pair's segment ids too
        f = np.stack([independent_head_vectors(lm, l, mv[l]["value"]).norm(dim=-1).numpy() for l in range(L)])
        fx_all.append(f)
        cats = [_category(j, lab, sp) for j, (lab, sp) in enumerate(zip(a.labels, a.special))]
        vis = [(i, j) for i in range(n) for j in range(n) if (j <= i or not causal)]
        cv.append(f.std(-1) / f.mean(-1))
        r = np.empty((L, H))
        for l in range(L):
            for h in range(H):
                r[l, h] = spearmanr([a["attention"][l, h, i, j] for i, j in vis], [f[l, h, j] for i, j in vis])[0]
        rho_af.append(r)
        for i in range(n):
            w = np.zeros((L, H, len(CATEGORIES)))
            m = np.zeros((L, H, len(CATEGORIES)))
            for j in range(n if not causal else i + 1):
                c = CATEGORIES.index(cats[j])
                w[..., c] += a["attention"][:, :, i, j]
                m[..., c] += a["norm"][:, :, i, j]
            share_w.append(w / w.sum(-1, keepdims=True))
            share_n.append(m / m.sum(-1, keepdims=True))
            if causal and i == 0:
                continue
            for k in mix:
                mat = a["attention"].mean(1) if k == "attention" else a[k]
                row = mat[:, i, : (i + 1 if causal else n)]
                mix[k].append(1 - mat[:, i, i] / row.sum(-1))
            for k in mix_head:
                row = a[k][:, :, i, : (i + 1 if causal else n)]
                mix_head[k].append(1 - a[k][:, :, i, i] / row.sum(-1))
        for k in after:
            ffc[k].append(
                [
                    1 - spearmanr([a["attn_res_ln"][l, i, j] for i, j in vis], [a[k][l, i, j] for i, j in vis])[0]
                    for l in range(L)
                ]
            )
        occurrences += [(tid, f[:, :, j]) for j, tid in enumerate(ids) if not a.special[j]]
    counts = Counter(t for t, _ in occurrences)
    types = sorted(counts)
    sums = {t: sum(v for tt, v in occurrences if tt == t) for t in types}
    ranks = {
        t: 1 + sum(counts[u] > counts[t] for u in types) + (sum(counts[u] == counts[t] for u in types) - 1) / 2
        for t in types
    }
    rho_freq = np.empty((L, H))
    for l in range(L):
        for h in range(H):
            rho_freq[l, h] = spearmanr([ranks[t] for t in types], [sums[t][l, h] / counts[t] for t in types])[0]
    flat = np.concatenate([x.reshape(L, H, -1) for x in fx_all], -1)
    return {
        "fx_cv": np.mean(cv, 0),
        "fx_cv_pooled": flat.std(-1) / flat.mean(-1),
        "rho_alpha_fx": np.mean(rho_af, 0),
        "rho_fx_freq": rho_freq,
        "share_weight": np.mean(share_w, 0),
        "share_norm": np.mean(share_n, 0),
        "mixing": {k: np.mean(v, 0) for k, v in mix.items()},
        "mixing_head": {k: np.mean(v, 0) for k, v in mix_head.items()},
        "ff_change": {k: np.mean(v, 0) for k, v in ffc.items()},
    }


@pytest.fixture(scope="module", params=["bert", "llama"])
def setup(request, tiny_bert_dir, tiny_llama_dir):
    path = tiny_bert_dir if request.param == "bert" else tiny_llama_dir
    lm = normviz.load(str(path), device="cpu", dtype="float64")
    raw = [(i + 1, ln.encode()) for i, ln in enumerate(LINES)]
    # Llama's eager attention takes its softmax in float32 even in float64, so a padded batch's α differs from
    # the reference's unpadded runs by ~1e-7 and near-tied Spearman ranks flip: its batches hold one sentence
    # (padded batches are checked on bert here, and against single runs in tests/models/test_value_zeroing.py)
    batch = 3 if request.param == "bert" else 1
    state, meta = process_chunk(lm, raw, STATISTICS, batch_size=batch, max_tokens=None)
    return lm, state, meta, tables(state, lm.n_layers, lm.n_heads), reference(lm, LINES)


def test_fx_norm_matches_model_value_vectors(setup):
    lm, *_ = setup
    enc = encode(lm.tokenizer, LINES[0])
    got = batch_maps(lm, [enc], ["fx_norm"])[0]["fx_norm"]
    mv = model_vectors(lm, enc.ids)
    assert got.shape == (lm.n_layers, lm.n_heads, len(enc.ids))
    for l in range(lm.n_layers):
        expected = independent_head_vectors(lm, l, mv[l]["value"]).norm(dim=-1).numpy()
        np.testing.assert_allclose(got[l], expected, rtol=1e-10)


def test_every_statistic_matches_reference(setup):
    lm, state, meta, tabs, ref = setup
    L, H = lm.n_layers, lm.n_heads
    assert sorted(meta["lines"]) == list(range(1, len(LINES) + 1)) and meta["bad"] == []
    hs = tabs["head_stats"].set_index(["layer", "head"])
    ls = tabs["layer_stats"].set_index("layer")
    close = dict(rtol=1e-7, atol=1e-10)
    for col in ("fx_cv", "fx_cv_pooled", "rho_alpha_fx", "rho_fx_freq"):
        np.testing.assert_allclose(hs[col].to_numpy().reshape(L, H), ref[col], err_msg=col, **close)
    # the reference's ratio 1 − m_ii / Σ_j m_ij is the share statistic (mixing_share_*); for attention weights
    # (rows sum to 1) it equals the paper's Σ_{j≠i} ᾱ_ij. The paper's vector ratio: test_fidelity_mixing.py
    for k, v in ref["mixing_head"].items():
        col = "mixing_attention" if k == "attention" else f"mixing_share_{k}"
        np.testing.assert_allclose(hs[col].to_numpy().reshape(L, H), v, err_msg=k, **close)
    for k, v in ref["mixing"].items():
        col = "mixing_attention" if k == "attention" else f"mixing_share_{k}"
        np.testing.assert_allclose(ls[col].to_numpy(), v, err_msg=k, **close)
    for k, v in ref["ff_change"].items():
        np.testing.assert_allclose(ls[f"ff_change_{k}"].to_numpy(), v, err_msg=k, **close)
    cs = tabs["category_shares"]
    for name, key in (("weight_share", "share_weight"), ("norm_share", "share_norm")):
        got = cs[name].to_numpy().reshape(L, H, len(CATEGORIES))
        np.testing.assert_allclose(got, ref[key], err_msg=name, **close)
        np.testing.assert_allclose(got.sum(-1), 1.0, rtol=1e-12)


def test_chunks_merge_to_the_single_pass(setup):
    lm, state, meta, tabs, ref = setup
    raw = [(i + 1, ln.encode()) for i, ln in enumerate(LINES)]
    batch = 1 if lm.spec.family == "llama" else 2  # one sentence per pass for Llama, as in setup
    parts = [process_chunk(lm, raw[s : s + 2], STATISTICS, batch, None)[0] for s in range(0, len(raw), 2)]
    merged = tables(merge(parts), lm.n_layers, lm.n_heads)
    for name, df in tabs.items():
        np.testing.assert_allclose(
            merged[name].select_dtypes("number").to_numpy(float),
            df.select_dtypes("number").to_numpy(float),
            rtol=1e-9,
            atol=1e-12,
            err_msg=name,
        )


def test_categorize():
    labels = ["[CLS]", "we", ",", "the", ".", "[SEP]", " .", "x", "[SEP]"]
    special = [True, False, False, False, False, True, False, False, True]
    got = [CATEGORIES[c] for c in categorize(labels, special)]
    assert got == ["start", "other", "comma", "other", "period", "sep", "period", "other", "sep"]
    assert CATEGORIES[categorize(["We"], [False])[0]] == "start"  # a decoder's first token


def test_rowwise_spearman_matches_scipy():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 30))
    y = x + rng.normal(size=(4, 30))
    y[1, :10] = 0.5  # ties
    got = rowwise_spearman(x, y)
    np.testing.assert_allclose(got, [spearmanr(a, b)[0] for a, b in zip(x, y)], rtol=1e-12)
    assert np.isnan(rowwise_spearman(np.ones((1, 5)), x[:1, :5]))[0]


def test_unknown_statistic_is_a_clear_error(tmp_path):
    from normviz.core.errors import NormvizError
    from normviz.corpus import CorpusJob, run_corpus

    (tmp_path / "in.txt").write_text("A sentence.\n")
    with pytest.raises(NormvizError, match="Unknown statistic"):
        run_corpus(
            CorpusJob(model="minilm", input=str(tmp_path / "in.txt"), out=str(tmp_path / "o"), stats=("mixng",)),
            show_bar=False,
        )
