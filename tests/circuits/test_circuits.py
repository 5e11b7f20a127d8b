"""Issue 41: the shipped known-circuit benchmarks (normviz.circuits, trained once by scripts/train_circuits.py)
are real — zero-ablating all of a circuit's heads removes ≥ 50 % of the mean logit difference over its examples,
while as many other heads drawn at random remove ≤ 25 % — and the multi-head ablation they use equals the
single-head ablation of normviz.attribution.knockout where the two overlap."""

from __future__ import annotations

import numpy as np
import pytest

from normviz import circuits
from normviz.core.errors import NormvizError
from normviz.session.session import Session

NAMES = circuits.names()


def test_the_benchmarks_ship():
    assert "induction" in NAMES
    with pytest.raises(NormvizError, match="no circuit benchmark"):
        circuits.load("no-such-circuit")


@pytest.mark.parametrize("name", NAMES)
def test_the_circuit_is_real(name):
    bench = circuits.load(name)
    assert bench.circuit and bench.description and len(bench.examples) >= 16
    assert all(0 <= l < bench.lm.n_layers and 0 <= h < bench.lm.n_heads for l, h in bench.circuit)
    got = circuits.check(bench, draws=20)
    assert got.total > 0  # the model prefers the answer over the foil on average
    assert got.circuit_removed >= 0.5, got.text()
    assert got.random_removed.mean() <= 0.25, got.text()
    assert got.random_removed.max() <= 0.25, got.text()


@pytest.mark.parametrize("name", NAMES)
def test_the_model_solves_its_examples(name):
    bench = circuits.load(name)
    scores = circuits.ablated(bench.lm, bench.examples, [])[:, 0]
    assert (scores > 0).mean() >= 0.9, scores


def test_one_head_sets_equal_ablate_heads():
    bench = circuits.load("induction")
    ids, token, foil = bench.examples[0]
    lm = bench.lm
    heads = [(l, h) for l in range(lm.n_layers) for h in range(lm.n_heads)]
    got = circuits.ablated(lm, [(ids, token, foil)], [[x] for x in heads])[0]
    s = Session.from_encoded(lm, [circuits.encoded(lm, ids)])[0]
    ref = s.ablate_heads(token, foil)
    np.testing.assert_allclose(got[0] - got[1:], ref.delta.ravel(), atol=1e-4)
    assert got[0] == pytest.approx(ref.total, abs=1e-4)


def test_induction_roles():
    bench = circuits.load("induction")
    roles = bench.roles
    assert roles["previous token"] and all(l == 0 for l, _ in roles["previous token"])
    assert roles["induction"] and all(l == 1 for l, _ in roles["induction"])
    assert bench.edges == {(p, q) for p in roles["previous token"] for q in roles["induction"]}
