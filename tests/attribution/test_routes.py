"""Issue 21: normviz.routes (Ferrando & Voita 2024, §3) against an independent implementation of the paper's
edge importance, written here from the raw modules and hooks (tests/attribution/reference.py's plain pass):
prox(z, y) = max(‖y‖₁ − ‖z − y‖₁, 0), importance = prox / Σ prox, per head and source token, residual and FF,
extracted backwards from the prediction's node."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.errors import NormvizError, NotApplicableError, TooCostlyError

from ..helpers import tiny
from . import reference as ref


def _session(lm, enc):
    return normviz.Session.from_encoded(lm, [enc])[0]


def _shares(parts: list[torch.Tensor], whole: torch.Tensor, measure: str) -> list[float]:
    """The paper's normalised L1 proximity, one part at a time (plain Python sums)."""
    if measure == "proximity":
        y1 = float(whole.abs().sum())
        score = [max(y1 - float((z - whole).abs().sum()), 0.0) for z in parts]
    else:
        score = [float(torch.linalg.vector_norm(z)) for z in parts]
    total = sum(score)
    return [s / total if total > 0 else 0.0 for s in score]


@torch.no_grad()
def reference_routes(model, ids, i: int, tau: float, measure="proximity", combine=False, renorm=False) -> dict:
    """{(source, target, kind, head): weight} of the routes, from hooks and the raw weights (``renorm``: each
    node's shares ≤ τ dropped and the rest divided by their sum before anything else)."""

    def shares(parts, whole):
        w = _shares(parts, whole, measure)
        if not renorm:
            return w
        w = [x if x > tau else 0.0 for x in w]
        return [x / sum(w) if sum(w) > 0 else 0.0 for x in w]

    p = ref.run(model, ids)
    cfg = model.config
    H = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    KV = getattr(cfg, "num_key_value_heads", None) or H
    L, n = len(p.attn), len(ids)
    edges: dict = {}
    reached = {i}
    for l in range(L - 1, -1, -1):
        mid = p.out[l] - p.ff_out[l]  # the residual after attention
        w_v, b_v, w_o, b_o = ref.value_out(model, l)
        dh = w_o.shape[0] // H
        v = p.x_hat[l] @ w_v + (b_v if b_v is not None else 0)
        f = [v[:, (h // (H // KV)) * dh : (h // (H // KV) + 1) * dh] @ w_o[h * dh : (h + 1) * dh] for h in range(H)]
        bias = b_o if b_o is not None else torch.zeros(w_o.shape[1], dtype=torch.float64)
        a_rows = set()
        for t in reached:
            ff, res = shares([p.ff_out[l][t], mid[t]], p.out[l][t])
            for kind, w in (("ff", ff), ("residual", res)):
                if w > tau:
                    edges[(f"a{l}_{t}", f"x{l + 1}_{t}", kind, None)] = w
                    a_rows.add(t)
        reached = set()
        for t in a_rows:
            parts = [p.attn[l][h, t, j] * f[h][j] for h in range(H) for j in range(n)]
            w = shares(parts + [p.x_in[l][t], bias], mid[t])
            if w[H * n] > tau:
                edges[(f"x{l}_{t}", f"a{l}_{t}", "residual", None)] = w[H * n]
                reached.add(t)
            for j in range(n):
                per_head = [w[h * n + j] for h in range(H)]
                cands = [(None, sum(per_head))] if combine else list(enumerate(per_head))
                for h, wh in cands:
                    if wh > tau:
                        edges[(f"x{l}_{j}", f"a{l}_{t}", "head", h)] = wh
                        reached.add(j)
    return edges


def _as_dict(r) -> dict:
    return {(e["source"], e["target"], e["kind"], e["head"]): e["weight"] for e in r.edges}


CASES = [
    ("gpt2", "proximity", False),
    ("llama", "proximity", False),
    ("llama_bias", "proximity", True),
    ("gpt2", "norm_share", False),
]


@pytest.mark.parametrize("arch,measure,combine", CASES)
def test_routes_equal_the_papers_definition(head_model, arch, measure, combine):
    lm = head_model(arch)
    enc = tiny.encoded(n=7, seed=4)
    s = _session(lm, enc)
    for pos, tau in ((-1, 0.04), (3, 0.01)):
        got = normviz.routes(s, position=pos, threshold=tau, measure=measure, combine_heads=combine)
        want = reference_routes(lm.head_model, enc.ids, pos % 7, tau, measure, combine)
        g = _as_dict(got)
        assert len(want) > 3
        assert set(g) == set(want)
        np.testing.assert_allclose([g[k] for k in want], list(want.values()), rtol=1e-9, atol=1e-12)
        ids = {nd["id"] for nd in got.nodes}
        assert f"x{lm.n_layers}_{pos % 7}" in ids
        assert all(e["source"] in ids and e["target"] in ids for e in got.edges)


def test_importances_sum_to_one_and_threshold_zero_keeps_every_reached_edge(head_model):
    lm = head_model("gpt2")
    enc = tiny.encoded(n=6, seed=1)
    r = normviz.routes(_session(lm, enc), threshold=0.0)
    into: dict = {}
    for e in r.edges:
        into.setdefault((e["target"], e["kind"] == "ff" or e["target"].startswith("x")), []).append(e["weight"])
    a_nodes = {nd["id"]: nd for nd in r.nodes if nd["kind"] == "a"}
    for (target, _), ws in into.items():
        total = sum(ws) + (a_nodes[target]["bias"] if target in a_nodes else 0.0)
        assert total == pytest.approx(1.0, abs=1e-9)
    # a higher threshold is a sub-graph, re-extracted without the model
    hi = r.above(0.1)
    assert set(_as_dict(hi)) <= set(_as_dict(r))
    want = reference_routes(lm.head_model, enc.ids, 5, 0.1)
    assert set(_as_dict(hi)) == set(want)
    arrays = r.arrays()
    assert arrays["edge_weight"].shape == (len(r.edges),)
    assert r.to_json().startswith("{")


def test_routes_refuse_bad_arguments_and_post_ln_and_cost(head_model):
    s = _session(head_model("gpt2"), tiny.encoded(n=6, seed=1))
    for bad in (dict(threshold=1.5), dict(threshold="x"), dict(measure="l2"), dict(position=99)):
        with pytest.raises(NormvizError):
            normviz.routes(s, **bad)
    with pytest.raises(NotApplicableError, match="post-LN"):
        normviz.routes(_session(head_model("bert"), tiny.encoded(n=6, seed=1)))
    costly = normviz.Session.from_encoded(
        head_model("gpt2"), [tiny.encoded(n=6, seed=1)], options={"routes_budget_s": 1e-9}
    )[0]
    with pytest.raises(TooCostlyError, match="routes"):
        normviz.routes(costly)
    assert costly.forward_passes == 0  # refused before any work


# ---------------------------------------------------------------- issue 29: the cost of the extraction, a deadline
def _round4_estimate_s(request) -> float:
    """Round 4's check: 3·L·n·(H·n + 4)·d FLOPs at 4e10 FLOP/s (what let 51–71 s runs through at ~0.2 s)."""
    n = request.n_tokens
    return 3.0 * request.n_layers * n * (request.n_heads * n + 4) * request.d_model / 4e10


@pytest.fixture(scope="module")
def wide_session():
    """A small GPT-2 (4 layers, 8 heads, d 256) on 128 tokens, float32: big enough that scoring the parts
    outweighs everything else."""
    import transformers as tf

    cfg = tf.GPT2Config(n_layer=4, n_head=8, n_embd=256, vocab_size=97, n_positions=256, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = tf.GPT2LMHeadModel(cfg).eval()
    tiny.randomize_weights(model)
    lm = normviz.from_model(model, None, name="small-gpt2")
    return normviz.Session.from_encoded(lm, [tiny.encoded(n=128, seed=3)])[0]


def test_the_cost_check_counts_the_extraction_that_flops_missed(wide_session):
    import time

    from normviz.attribution import flow

    s, tau = wide_session, 0.01
    budget = 3 * _round4_estimate_s(s.request)  # the old check lets this through ...
    t0 = time.perf_counter()
    r = normviz.routes(s, threshold=tau)  # (no budget: runs)
    spent = time.perf_counter() - t0
    assert spent > budget and len(r.edges) > 100  # ... and the run takes longer than it
    assert flow.cost(s.request, {}, tau) > budget
    costly = normviz.Session.from_encoded(s.lm, [tiny.encoded(n=128, seed=3)], options={"routes_budget_s": budget})[0]
    with pytest.raises(TooCostlyError, match=r"τ = 0.01 would take about .* fits the budget up to about \d+ tokens"):
        normviz.routes(costly, threshold=tau)
    assert costly.forward_passes == 0  # refused before the recording pass
    # a higher τ reaches fewer rows: estimated cheaper; every τ's estimate is below the worst case τ = 0
    assert (
        flow.cost(s.request, {}, 0.2)
        < flow.cost(s.request, {}, 0.04)
        < flow.cost(s.request, {}, tau)
        < flow.cost(s.request, {}, 0.0)
    )


def test_routes_stop_at_their_deadline(head_model, monkeypatch):
    from normviz.attribution import flow
    from normviz.core.errors import DeadlineError

    assert flow.deadline_s({}) == flow.DEFAULT_DEADLINE_S  # never unbounded
    assert flow.deadline_s({"routes_budget_s": 10}) == flow.DEADLINE_FACTOR * 10
    assert flow.deadline_s({"routes_budget_s": 10, "routes_deadline_s": 3}) == 3
    s = normviz.Session.from_encoded(
        head_model("gpt2"), [tiny.encoded(n=6, seed=1)], options={"routes_deadline_s": 1.5}
    )[0]
    ticks = iter(range(1000))
    monkeypatch.setattr(flow.Deadline, "clock", staticmethod(lambda: float(next(ticks))))  # 1 s per look
    with pytest.raises(DeadlineError, match="routes_deadline_s.*Raise τ"):
        normviz.routes(s, threshold=0.0)
    monkeypatch.undo()
    assert len(normviz.routes(s, threshold=0.0).edges) > 10  # the session is left usable


@pytest.mark.parametrize("arch", ["gpt2", "llama_bias"])
def test_renormalised_routes_are_lm_tts_app_graph(head_model, arch):
    """renormalise=True: each node's importances above τ, divided by their sum (LM-TT's
    apply_threshold_and_renormalize); the same edges as without it per head, weights summing to 1 per node;
    with combine_heads=True a source token's edge exists when one of its heads exceeds τ (not their sum): the
    per-head graph's edges with the heads merged."""
    lm = head_model(arch)
    enc = tiny.encoded(n=7, seed=4)
    s = _session(lm, enc)
    for tau in (0.04, 0.01):
        plain = _as_dict(normviz.routes(s, threshold=tau))
        for combine in (False, True):
            r = normviz.routes(s, threshold=tau, combine_heads=combine, renormalise=True)
            got, want = _as_dict(r), reference_routes(lm.head_model, enc.ids, 6, tau, combine=combine, renorm=True)
            assert set(got) == set(want) and len(want) > 3
            np.testing.assert_allclose([got[k] for k in want], list(want.values()), rtol=1e-9, atol=1e-12)
            assert r.renormalised and r.to_dict()["renormalised"]
            if not combine:
                assert set(got) == set(plain)  # renormalising changes the weights, not the edges
            else:  # a token edge where one head exceeds τ: the per-head graph's edges, heads merged
                assert set(got) == {(a, b, kind, None) for a, b, kind, _ in plain}
                assert set(got) <= set(_as_dict(normviz.routes(s, threshold=tau, combine_heads=True)))
        into: dict = {}
        for e in normviz.routes(s, threshold=tau, renormalise=True).edges:
            into.setdefault((e["target"], e["kind"] == "ff" or e["target"].startswith("x")), []).append(e["weight"])
        a_nodes = {nd["id"]: nd for nd in r.nodes if nd["kind"] == "a"}
        for (target, _), ws in into.items():  # every node's kept parts sum to 1 (b^O's share on a-nodes)
            total = sum(ws) + (a_nodes[target]["bias"] if target in a_nodes else 0.0)
            assert total == pytest.approx(1.0, abs=1e-9), target
    with pytest.raises(NormvizError, match="renormalise=True"):
        r.above(0.2)
