"""Attention flow's solver: hand cases, a networkx reference, causal structure, the cost limits."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from normviz.core.errors import TooCostlyError
from normviz.methods.maxflow import SCALE, attention_flow, check_cost
from normviz.methods.rollouts import attention_with_residual

DELTA = 0.5 / SCALE  # largest rounding of one capacity (scipy solver)
SOLVERS = [
    "scipy",
    pytest.param(
        "igraph",
        marks=pytest.mark.skipif(importlib.util.find_spec("igraph") is None, reason="python-igraph not installed"),
    ),
]


def random_a_hat(layers: int, n: int, seed: int, causal: bool = False) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a = rng.random((layers, 2, n, n)) ** 3
    if causal:
        a = np.tril(a)
    a = a / a.sum(-1, keepdims=True)
    return attention_with_residual(a)


def networkx_flow(a_hat: np.ndarray) -> np.ndarray:
    """The authors' construction: nx.DiGraph with float capacities, Edmonds–Karp from every node (l+1, i)
    to every input node (0, j), rows normalised."""
    nx = pytest.importorskip("networkx")
    layers, n, _ = a_hat.shape
    g = nx.DiGraph()
    for layer in range(layers):
        for i in range(n):
            for j in range(n):
                if a_hat[layer, i, j] > 0:
                    g.add_edge((layer + 1, i), (layer, j), capacity=float(a_hat[layer, i, j]))
    out = np.zeros((layers, n, n))
    for layer in range(layers):
        for i in range(n):
            for j in range(n):
                if g.has_node((0, j)):
                    out[layer, i, j] = nx.maximum_flow_value(
                        g, (layer + 1, i), (0, j), flow_func=nx.algorithms.flow.edmonds_karp
                    )
    return out / out.sum(-1, keepdims=True)


@pytest.mark.parametrize("solver", SOLVERS)
def test_three_tokens_by_hand(solver):
    """Layer 0: the flow from (1, i) to (0, j) is the single edge Â_0[i, j].
    Layer 1 (two-edge paths through distinct middle nodes): flow = Σ_k min(Â_1[i,k], Â_0[k,j]).
    Â_0 = [[1,0,0],[.25,.75,0],[.1,.1,.8]], Â_1 = [[.5,.5,0],[0,.5,.5],[.5,0,.5]]:
    row 0 of layer 1: j=0: min(.5,1)+min(.5,.25)+0 = .75; j=1: 0+min(.5,.75)+0 = .5; j=2: 0 → [.6, .4, 0]."""
    a_hat = np.array([[[1, 0, 0], [0.25, 0.75, 0], [0.1, 0.1, 0.8]], [[0.5, 0.5, 0], [0, 0.5, 0.5], [0.5, 0, 0.5]]])
    f = attention_flow(a_hat, solver)
    np.testing.assert_allclose(f[0], a_hat[0], atol=4 * DELTA)
    np.testing.assert_allclose(f[1, 0], [0.6, 0.4, 0], atol=8 * DELTA)
    # row 2: j=0: min(.5,1)+0+min(.5,.1) = .6; j=1: 0+0+min(.5,.1) = .1; j=2: min(.5,.8) = .5 → /1.2
    np.testing.assert_allclose(f[1, 2], np.array([0.6, 0.1, 0.5]) / 1.2, atol=8 * DELTA)
    # layer 2 through the solver: three layers of identity except the top → flow = rownorm of Â_2 itself
    eye_below = np.stack([np.eye(3), np.eye(3), a_hat[1]])
    np.testing.assert_allclose(attention_flow(eye_below, solver)[2], a_hat[1], atol=8 * DELTA)


@pytest.mark.parametrize("solver", SOLVERS)
def test_identity_graph_flows_straight_down(solver):
    f = attention_flow(np.broadcast_to(np.eye(4), (5, 4, 4)).copy(), solver)
    np.testing.assert_array_equal(f, np.broadcast_to(np.eye(4), (5, 4, 4)))


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("causal", [False, True])
def test_matches_networkx_edmonds_karp(causal, solver):
    a_hat = random_a_hat(layers=4, n=6, seed=3 + causal, causal=causal)
    ours = attention_flow(a_hat, solver)
    ref = networkx_flow(a_hat)
    bound = DELTA * 4 * 6 * 6 * 4  # ≤ δ·|E| per flow value, doubled by the row normalisation
    np.testing.assert_allclose(ours, ref, atol=bound)
    assert np.abs(ours - ref).max() < 1e-7
    np.testing.assert_allclose(ours.sum(-1), 1, atol=1e-12)
    if causal:
        assert np.all(np.triu(ours, 1) == 0)


def test_limits_are_configurable():
    check_cost(100, 2, {"flow_max_tokens": 128, "flow_max_work": 1e9})
    with pytest.raises(TooCostlyError):
        check_cost(100, 2, {})
    with pytest.raises(TooCostlyError, match="flow_max_work"):
        check_cost(40, 30, {})  # a 30-layer decoder at 40 tokens: 1.2e9 estimated work


def _flow(att: np.ndarray, options: dict, causal: bool):
    from normviz.methods import maxflow
    from normviz.methods.base import Inputs, Request

    L, H, n, _ = att.shape
    request = Request(
        n_tokens=n,
        n_layers=L,
        n_heads=H,
        d_model=8,
        d_ff=16,
        placement="pre" if causal else "post",
        causal=causal,
        gated=False,
        device="cpu",
    )
    maxflow.check(request, "flow", options)

    def never():
        raise AssertionError("flow reads only the attention map")

    out = maxflow.compute(Inputs(request=request, layer_views=never, arrays={"attention": att}), ["flow"], options)
    return out.arrays["flow"], out.notes["flow"]


def test_receptive_field_flow_of_uniform_causal_attention_is_uniform():
    """A decoder attending uniformly over its prefix: its flow is the baseline's, so the corrected rows are
    1/(i+1); the plain flow leans to the first token. An encoder ignores the option and says so."""
    from normviz.methods.rollouts import uniform_causal

    n, layers = 5, 4
    att = np.broadcast_to(uniform_causal(n), (layers, 2, n, n)).copy()
    opts = {"rollout_normalization": "receptive_field", "flow_solver": "scipy"}
    plain, _ = _flow(att, {"flow_solver": "scipy"}, causal=True)
    assert plain[-1, -1, 0] > 1.5 * plain[-1, -1, -2]
    rf, note = _flow(att, opts, causal=True)
    np.testing.assert_allclose(rf, np.broadcast_to(uniform_causal(n), (layers, n, n)), atol=1e-9)
    assert "receptive-field normalised" in note
    att2 = np.tril(np.random.default_rng(3).random((layers, 2, n, n)))  # another decoder: rows sum to 1, causal
    att2 /= att2.sum(-1, keepdims=True)
    rf2, _ = _flow(att2, opts, causal=True)
    np.testing.assert_allclose(rf2.sum(-1), 1, atol=1e-12)
    assert np.all(np.triu(rf2, 1) == 0) and np.abs(rf2 - rf).max() > 1e-3
    enc, note = _flow(att2, opts, causal=False)
    np.testing.assert_array_equal(enc, _flow(att2, {"flow_solver": "scipy"}, causal=False)[0])
    assert "ignored" in note


def test_receptive_field_flow_counts_the_baseline_in_its_cost():
    from normviz.methods import maxflow
    from normviz.methods.base import Request

    request = Request(
        n_tokens=40, n_layers=6, n_heads=2, d_model=8, d_ff=16, placement="pre", causal=True, gated=False, device="cpu"
    )
    limit = {"flow_max_work": 1.5 * maxflow.estimated_work(40, 6)}
    maxflow.check(request, "flow", limit)
    with pytest.raises(TooCostlyError):
        maxflow.check(request, "flow", {**limit, "rollout_normalization": "receptive_field"})
