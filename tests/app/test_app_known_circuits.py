"""Issue 41: the Trust page's "Known circuits" view draws the shipped scores — one ROC per method whose area is
the AUROC the library computes from the same grid, and the head grid with the circuit marked and the method's top
heads outlined — and the Trust page hooks it in."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from streamlit.testing.v1 import AppTest

from normviz.trust import circuit_scores as cs
from normviz.ui.views import known_circuits as KC

from ..helpers.app import ROOT, arr, figures, no_exception


def _view():
    import streamlit as st

    from normviz.ui.kit import st_parts as ui
    from normviz.ui.views import known_circuits as KC

    KC.render(ui, st)


def test_the_view_draws_the_shipped_scores():
    rows = cs.shipped()
    assert rows and rows[0]["benchmark"] == "induction"
    at = AppTest.from_function(_view, default_timeout=120)
    at.run()
    no_exception(at)
    assert at.selectbox(key="w_circuits_bench").value == "induction"
    figs = figures(at)
    roc, grid = figs[0], figs[1]
    row = rows[0]
    truth = KC.truth_of(row)
    for trace, m in zip(roc["data"], row["methods"]):
        x, y = arr(trace["x"]), arr(trace["y"])
        area = float(((y[1:] + y[:-1]) / 2 * np.diff(x)).sum())  # the ROC's area = the AUROC (ties: one step)
        assert abs(area - cs.auroc(m["grid"], truth)) < 1e-9 and abs(area - m["auroc"]) < 1e-9
        assert m["method"] in trace["name"]
    assert len(grid["layout"]["shapes"]) == int(truth.sum())  # the top heads outlined, as many as the circuit
    at.selectbox(key="w_circuits_method").set_value("attention").run()
    no_exception(at)
    grid = figures(at)[1]
    top = next(m for m in row["methods"] if m["method"] == "attention")["top"][: int(truth.sum())]
    outlined = sorted((int(round(s["y0"] + 0.5)), int(round(s["x0"] + 0.5))) for s in grid["layout"]["shapes"])
    assert outlined == sorted(tuple(t) for t in top)
    attention = next(m for m in row["methods"] if m["method"] == "attention")
    np.testing.assert_allclose(arr(grid["data"][0]["z"]), np.asarray(attention["grid"]))
    assert at.dataframe[0].value["method"].tolist() == [m["method"] for m in row["methods"]]
    edges = at.dataframe[1].value  # the edge methods' AUROC against the circuit's edges
    assert edges["edge method"].tolist() == ["eap", "eap-ig"] == [m["method"] for m in row["edge_methods"]]
    np.testing.assert_allclose(edges["AUROC"].to_numpy(), [m["auroc"] for m in row["edge_methods"]])
    assert not at.info  # induction has a known circuit
    # an embedded model without a known circuit: shipped with its proxy truth, and said so
    proxy = next(r for r in rows if r["benchmark"] == "smollm2")
    at.selectbox(key="w_circuits_bench").set_value("smollm2").run()
    no_exception(at)
    assert proxy["proxy"] and "no known circuit" in at.info[0].value and len(at.dataframe) == 1
    roc = figures(at)[0]
    for trace, m in zip(roc["data"], proxy["methods"]):  # one ROC per method (then the chance line)
        assert trace["name"].startswith(m["method"] + " (")


def test_the_trust_page_hooks_the_view():
    page = (Path(ROOT) / "app_pages" / "5_Trust.py").read_text(encoding="utf-8")
    assert "KC.render(ui, st, fs)" in page and "Known circuits" in page
