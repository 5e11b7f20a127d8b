"""Issue 21, round 4: what the Why page keeps per session and position — the logit lens as shown (top-5 table and
the offered tokens' columns, not the [L+1, V] array) and the routes computed once at the lowest τ asked and
re-extracted for a higher one — equal to the full computations (tiny float64 GPT-2)."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.ui.kit.memo import size_of
from normviz.ui.views import why as W

from ..helpers import tiny


def _session(lm, n=7, seed=4):
    return normviz.Session.from_encoded(lm, [tiny.encoded(n=n, seed=seed)])[0]


def _edges(r) -> set:
    return {(e["source"], e["target"], e["kind"], e["head"], round(e["weight"], 12)) for e in r.edges}


def test_lens_view_keeps_the_table_and_the_offered_columns_only(head_model):
    s = _session(head_model("gpt2"))
    lens = s.logit_lens(position=-1)
    ids = [3, 17, 40]
    view = W.lens_view(lens, None, ids)
    assert set(view.columns) == set(ids)
    for t in ids:
        np.testing.assert_array_equal(view.columns[t], lens[:, t])
    curves = view.curves({"a": 17})
    np.testing.assert_allclose(curves["a"], np.exp(lens[:, 17].astype(np.float64)), rtol=0, atol=0)
    # the table: per layer the 5 most probable tokens, best first, as the full sort gives them
    assert len(view.table) == lens.shape[0]
    for l, row in enumerate(view.table):
        best = np.argsort(-lens[l], kind="stable")[:5]
        assert [row[f"#{k + 1}"] for k in range(5)] == [f"{int(t)} {float(np.exp(lens[l, t])):.3f}" for t in best]
    # what the memo holds: the table's strings and three columns, far below the array
    assert size_of(view) < lens.nbytes / 4
    assert size_of(view) >= 3 * lens[:, 0].nbytes


def test_routes_at_computes_the_lowest_tau_once_and_re_extracts_higher_ones(head_model, monkeypatch):
    from normviz import attribution

    s = _session(head_model("gpt2"))
    calls = []
    real = attribution.routes
    monkeypatch.setattr(attribution, "routes", lambda *a, **k: calls.append(k["threshold"]) or real(*a, **k))
    r1 = W.routes_at(s, 6, 0.2)
    assert calls == [0.2] and r1.threshold == 0.2
    r2 = W.routes_at(s, 6, 0.3)  # higher: from the routes at 0.2
    assert calls == [0.2] and r2.threshold == 0.3
    assert _edges(r2) == _edges(real(s, position=6, threshold=0.3))
    r3 = W.routes_at(s, 6, 0.05)  # lower: computed again, then kept
    assert calls == [0.2, 0.05]
    assert _edges(r3) == _edges(real(s, position=6, threshold=0.05))
    r4 = W.routes_at(s, 6, 0.2)
    assert calls == [0.2, 0.05] and _edges(r4) == _edges(r1)
    assert [n["id"] for n in r4.nodes] == [n["id"] for n in r1.nodes]
    assert W.routes_at(s, 6, 0.0).threshold == pytest.approx(0.01)  # the slider's least
