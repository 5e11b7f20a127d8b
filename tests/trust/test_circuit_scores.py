"""Issue 41: circuit scores (normviz.trust.circuit_scores) — AUROC equals the share of (circuit, other) pairs
ranked right, counted by brute force; the faithfulness curve runs from 0 (every head mean-ablated) to 1 (none)
and its points equal ablation passes written independently; a small evaluation on the shipped induction
benchmark gives every method a row with intervals around its estimate."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from normviz import circuits
from normviz.trust import circuit_scores as cs


def _pairs_auroc(s, t):
    pos, neg = s[t], s[~t]
    wins = [1.0 if a > b else 0.5 if a == b else 0.0 for a, b in itertools.product(pos, neg)]
    return float(np.mean(wins))


def test_auroc_counts_pairs():
    rng = np.random.default_rng(0)
    for _ in range(20):
        s = rng.integers(0, 5, 12).astype(float)  # ties on purpose
        t = rng.random(12) < 0.4
        if t.all() or not t.any():
            continue
        assert cs.auroc(s, t) == pytest.approx(_pairs_auroc(s, t), abs=1e-12)
    t = np.array([True, True, False, False])
    assert cs.auroc([4, 3, 2, 1], t) == 1.0 and cs.auroc([1, 2, 3, 4], t) == 0.0
    assert np.isnan(cs.auroc([1, 2], [True, True]))


def test_area_and_recovered():
    assert cs.area(np.linspace(0, 1, 11)) == pytest.approx(0.5)
    assert cs.area(np.ones(5)) == pytest.approx(1.0)
    f = np.array([[1.0, 2.0, 5.0], [3.0, 4.0, 7.0]])
    np.testing.assert_allclose(cs.recovered(f), [0.0, 1 / 4, 1.0])


@pytest.fixture(scope="module")
def small():
    bench = circuits.load("induction")
    return dataclasses.replace(bench, examples=bench.examples[:4])


def test_curve_points_are_ablation_passes(small):
    lm = small.lm
    means = cs.head_means_of(lm, [circuits.encoded(lm, ids) for ids, _, _ in small.examples])
    order = [(l, h) for l in range(lm.n_layers) for h in range(lm.n_heads)]
    f = cs.curve(small, order, means)
    K = len(order)
    assert f.shape == (4, K + 1)
    for k in (0, 3, K):
        ref = circuits.ablated(lm, small.examples, [order[k:]] if k < K else [], means)
        np.testing.assert_allclose(f[:, k], ref[:, 1] if k < K else ref[:, 0], atol=1e-5)
    share = cs.recovered(f)
    assert share[0] == 0.0 and share[-1] == 1.0
    sub = cs.curve(small, order, means, [0, 5, K])  # a model with many heads measures a few k only
    np.testing.assert_allclose(sub, f[:, [0, 5, K]], atol=1e-5)
    assert cs.curve_ks(K) == list(range(K + 1)) and cs.curve_ks(270)[:2] == [0, 8] and cs.curve_ks(270)[-1] == 270
    assert cs.area(np.array([0.0, 1.0, 1.0]), [0.0, 0.1, 1.0]) == pytest.approx(0.95)


def test_evaluate_scores_every_method(small):
    res = cs.evaluate(small, resamples=50)
    assert [r.method for r in res.rows] == list(cs.METHODS)
    for r in res.rows:
        assert 0.0 <= r.auroc <= 1.0 and 0.0 <= r.auroc_lo <= r.auroc_hi <= 1.0
        assert r.auroc_lo - 1e-9 <= r.auroc <= r.auroc_hi + 1e-9 or r.auroc_lo == r.auroc_hi
        assert r.seconds > 0 and len(r.share) == small.lm.n_layers * small.lm.n_heads + 1
        assert res.scores[r.method].shape == (4, small.lm.n_layers, small.lm.n_heads)
    assert res.row("ablation").cost_vs_ablation == pytest.approx(1.0)
    md = cs.markdown([res])
    assert "| induction | atp* |" in md and "AUROC" in md and "completeness gap" in md
    assert res.eap_gap.shape == (4, 2) and np.isfinite(res.eap_gap).all()
    assert "<table>" in cs.html([res])
    # the edge methods: AUROC over the head-to-head edges against the benchmark's (K-composition) edges
    assert [r.method for r in res.edge_rows] == list(cs.EDGE_METHODS)
    for r in res.edge_rows:
        assert 0.0 <= r.auroc_lo <= r.auroc_hi <= 1.0 and r.seconds > 0 and len(r.top) == 10
    assert "eap-ig edges" in md and '"edge_methods"' in cs.to_json([res])


def test_edge_auroc_counts_only_existing_edges(small):
    truth = cs.edge_truth(small)
    assert truth.sum() == len(small.edges) and not truth[1].any()  # no edge leaves the last layer
    scores = np.where(truth, 2.0, 1.0)
    scores[1] = np.nan  # a layer-1 head has no later head: those are not edges
    assert cs.edge_auroc(scores, truth) == 1.0
    scores[0, 3, 1, 0] = 0.5  # one true edge ranked below every other edge
    pos, neg = int(truth.sum()), int(np.isfinite(scores).sum() - truth.sum())
    assert cs.edge_auroc(scores, truth) == pytest.approx(1 - neg / (pos * neg))


def test_proxy_benchmark_says_it_has_no_circuit(small):
    bench = cs.proxy_benchmark(small.lm, examples=small.examples[:3], share=0.25, name="proxy")
    assert len(bench.circuit) == 4 and bench.info["proxy"] and "no known circuit" in bench.description
    res = cs.evaluate(bench, methods=("ablation", "attention"), resamples=20)
    assert res.proxy and res.row("ablation").auroc == 1.0 and res.edge_rows == []
    assert "NO KNOWN CIRCUIT" in cs.markdown([res])
