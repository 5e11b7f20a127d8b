"""Issue 31: the Trust page on minilm — the Spearman (and Kendall) it shows for a text equal
normviz.trust.explain_text's for the same session settings; the knockout bars are the library's deltas."""
from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.trust import explain_text
from normviz.ui.kit import st_parts
from normviz.ui.views import trust as T

from ..helpers.app import app, arr, figures, no_exception
from .models import MODELS

TEXT = "The cat sat on the mat."
PAGE = "app_pages/5_Trust.py"


@pytest.fixture(scope="module")
def page():
    at = app(PAGE, {"model": "minilm", "text": TEXT})
    at.run(timeout=300)
    return at


def test_the_spearman_shown_is_the_librarys(page):
    no_exception(page)
    lm = st_parts.model_cache().get_or_compute("minilm", lambda: normviz.load("minilm"))
    keys = [k for k in T.DEFAULT_KEYS if k in normviz.all_keys(lm)]
    t = explain_text(normviz.Session(lm, TEXT), keys, heads=False, gradients=True, ig_steps=16)
    shown = page.dataframe[0].value.set_index("attribution")
    lib = {r["attribution"]: r for r in t.rows()}
    assert set(shown.index) == set(lib)
    for key, row in lib.items():
        for col in ("spearman", "kendall"):
            if row[col] is None or np.isnan(row[col]):
                assert np.isnan(shown.loc[key, col])
            else:
                assert shown.loc[key, col] == pytest.approx(row[col], abs=1e-9), (key, col)
    beside = [f for f in figures(page) if f["data"][0].get("name") == "knockout"][0]
    ko = arr(beside["data"][0]["customdata"])
    np.testing.assert_allclose(ko, t.knockout.delta, rtol=1e-4, atol=1e-6)
    assert any("What the numbers mean" in e.label for e in page.expander)


def test_the_shipped_run_says_what_it_scored(page):
    """The corpus table comes with what its run scored (texts, prediction, interventions), from
    assets/trust/<model>.txt beside the CSV; every shipped CSV has one, and its intervals hold their means."""
    from normviz.trust.report import SHIPPED, shipped, shipped_about

    captions = [c.value for c in page.caption]
    assert any(c.startswith("The run: ") and c[len("The run: "):] == shipped_about("minilm") for c in captions)
    for csv_path in sorted(SHIPPED.glob("*.csv")):
        about = shipped_about(csv_path.stem)
        assert about and "texts" in about, csv_path
        rows = shipped(csv_path.stem)
        assert rows and all(r["lo"] <= r["mean"] <= r["hi"] and r["n"] > 0 for r in rows), csv_path
    # smollm2's shipped run is the runner-up rerun with head ablation: its heads' scores are in the table
    assert "runner-up" in shipped_about("smollm2")
    assert any(r["score"] == "spearman_heads" and r["key"] == "direct_heads" for r in shipped("smollm2"))


@pytest.mark.parametrize("model", [m for m in MODELS if m != "minilm"])
def test_the_page_draws_on_every_decoder(model):
    """Issue 42 item 1: on a decoder the explained token is named (``shown()``); on 4c42c33 a local list named
    ``shown`` shadowed it and every decoder text ended in UnboundLocalError ("Something went wrong")."""
    at = app(PAGE, {"model": model, "text": "The capital of France is"})
    at.run(timeout=900)
    no_exception(at)
    assert not [e.value for e in at.error], [e.value for e in at.error]
    assert at.dataframe and len(at.dataframe[0].value) > 3
    assert any(f["data"][0].get("name") == "knockout" for f in figures(at))
    assert any("Explained: the **" in m.value and " of " in m.value for m in at.markdown)
