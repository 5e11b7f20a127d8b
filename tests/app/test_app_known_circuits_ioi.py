"""Issue 41: the Known circuits view with the IOI benchmark listed — picked, it draws one ROC per shipped method whose
area is the AUROC the library computes from the same grid, the head grid with the 3 circuit heads and as many of the
method's top heads outlined, and no edge table (the benchmark claims no edges)."""

from __future__ import annotations

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from normviz.trust import circuit_scores as cs
from normviz.ui.views import known_circuits as KC

from ..helpers.app import arr, figures, no_exception

ROWS = {r["benchmark"]: r for r in cs.shipped()}
pytestmark = pytest.mark.skipif("ioi" not in ROWS, reason="ioi scores not shipped")


def _view():
    import streamlit as st

    from normviz.ui.kit import st_parts as ui
    from normviz.ui.views import known_circuits as KC

    KC.render(ui, st)


def test_the_view_draws_the_ioi_scores():
    row = ROWS["ioi"]
    assert not row["proxy"] and sorted(map(tuple, row["circuit"])) == [(0, 1), (1, 2), (2, 3)]
    at = AppTest.from_function(_view, default_timeout=120)
    at.run()
    at.selectbox(key="w_circuits_bench").set_value("ioi").run()
    no_exception(at)
    roc, grid = figures(at)[:2]
    truth = KC.truth_of(row)
    assert truth.shape == (3, 4) and int(truth.sum()) == 3
    for trace, m in zip(roc["data"], row["methods"]):
        x, y = arr(trace["x"]), arr(trace["y"])
        area = float(((y[1:] + y[:-1]) / 2 * np.diff(x)).sum())
        assert abs(area - cs.auroc(m["grid"], truth)) < 1e-9 and abs(area - m["auroc"]) < 1e-9
    assert len(grid["layout"]["shapes"]) == 3
    assert len(at.dataframe) == 1 and not at.info  # the method table only: no edges claimed, not a proxy
