"""Issue 21: the Why page on smollm2 — each chart's numbers against normviz's own (Session.predict / explain /
logit_lens, normviz.routes), up to one positive scale; a head cell's click lands on Explore at that head."""
from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.ui.kit import st_parts
from normviz.viz.why import txt

from ..helpers.app import app, arr, figures, no_exception, texts

TEXT = "The capital of France is"
PAGE = "app_pages/0_Why.py"


def smollm2():
    return st_parts.model_cache().get_or_compute("smollm2", lambda: normviz.load("smollm2"))


def by_kind(at) -> dict:
    return {f["layout"].get("meta", {}).get("normviz"): f for f in figures(at)}


def sources_chart(at) -> dict:
    """The first signed bar chart (the input tokens'; the head's row comes later)."""
    return [f for f in figures(at) if f["layout"].get("meta", {}).get("normviz") == "signed_bars"][0]


def proportional(a, b) -> float:
    """The positive scale c with a = c·b (asserting it exists)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    c = float(a @ b / (b @ b))
    assert c > 0
    np.testing.assert_allclose(a, c * b, rtol=1e-4, atol=1e-6 * np.abs(b).max())
    return c


@pytest.fixture(scope="module")
def page():
    at = app(PAGE, {"model": "smollm2", "text": TEXT})
    at.run()
    return at


def test_every_chart_equals_normviz_numbers(page):
    no_exception(page)
    figs = by_kind(page)
    assert {"candidates", "signed_bars", "head_grid", "lens", "routes", "sinks"} <= set(figs)
    s = normviz.Session(smollm2(), TEXT)
    cands = s.predict(top=10)
    e = s.explain()
    # (1) the top candidate's text, its probability as the longest bar
    bars = figs["candidates"]["data"][0]
    assert list(bars["customdata"])[0] == txt(cands[0].token)
    np.testing.assert_allclose(arr(bars["x"]), [c.prob for c in cands], rtol=1e-5)
    # (2) sources (+ bias) and the sentence saying they equal the model's logit
    src = sources_chart(page)
    proportional(arr(src["data"][0]["y"]), list(e.sources) + [e.bias])
    assert any("they are equal" in t and f"{e.total:.4f}" in t for t in texts(page.caption))
    # (3) heads.sum(-1), then FF, b^O, embedding, final bias after a gap column
    grid = arr(figs["head_grid"]["data"][0]["z"])
    L, H = e.heads.shape[:2]
    proportional(grid[:, :H].ravel(), e.heads.sum(-1).ravel())
    proportional(grid[:, H + 1], e.ff)
    # (4) the lens ends at the model's probability
    lens = figs["lens"]["data"][0]
    y = arr(lens["y"])
    assert len(y) == L + 1
    assert y[-1] == pytest.approx(cands[0].prob, rel=1e-4)
    # (5) the routes: every node of normviz.routes at the page's τ
    r = normviz.routes(s, threshold=0.04)
    node_trace = figs["routes"]["data"][-1]
    assert len(node_trace["x"]) == len(r.nodes) > 1


def test_a_foil_and_an_earlier_position(page):
    cands = normviz.Session(smollm2(), TEXT).predict(top=10)
    page.selectbox(key="w_why_foil").set_value(cands[1].id).run()
    no_exception(page)
    assert page.query_params["foil"] == cands[1].token
    e = normviz.Session(smollm2(), TEXT).explain(foil=cands[1].id)
    src = sources_chart(page)
    proportional(arr(src["data"][0]["y"]), list(e.sources) + [e.bias])
    page.selectbox(key="w_why_foil").set_value("(none)").run()
    page.selectbox(key="w_why_pos").set_value(2).run()  # "The capital of" → its own next token " France"
    no_exception(page)
    assert page.query_params["position"] == "2"
    assert "France" in str(page.selectbox(key="w_why_token").format_func(page.selectbox(key="w_why_token").value))


def test_clicking_a_head_cell_opens_it_on_explore(monkeypatch):
    at = app("app.py", {"model": "smollm2", "text": TEXT})
    at.run()
    at.switch_page(PAGE)
    at.run()
    no_exception(at)
    monkeypatch.setattr(st_parts, "grid_clicks", lambda charts, cell: {"layer": 3, "head": 2, "chart": "why_heads"})
    at.run()
    no_exception(at)
    assert at.query_params["layer"] == "3" and at.query_params["head"] == "2"
    assert at.slider(key="w_layer").value == 3 and at.selectbox(key="w_head").value == 2


def test_a_model_without_head_points_to_smollm2():
    at = app(PAGE, {"text": TEXT})  # the shared default model: minilm
    at.run()
    no_exception(at)
    assert any("no language-model head" in t and "smollm2" in t for t in texts(at.info))
    assert "candidates" in by_kind(at)


def test_learn_tab_explains_the_three_answers_live():
    at = app("app_pages/2_Learn.py", {"model": "smollm2", "lesson": "why"})
    at.run()
    no_exception(at)
    text = at.text_input(key="w_learn_text").value
    e = normviz.Session(smollm2(), text).explain()
    caps = texts(at.caption)
    assert any(c.startswith(f"Direct parts: Σ = {e.total:.4f}") for c in caps), caps
    assert any(c.startswith(f"Sources: Σ = {e.total:.4f}") for c in caps), caps
    assert any("prox" in l.value for l in at.latex)


def test_toy_mt_explains_a_target_word_from_its_source():
    at = app(PAGE, {"model": "toy-mt", "text": "the big dog often sees a small red car", "position": "2"})
    at.run()
    no_exception(at)
    lm = st_parts.model_cache().get_or_compute("toy-mt", lambda: normviz.load("toy-mt"))
    s = normviz.Session(lm, "the big dog often sees a small red car")
    e = s.explain(position=2, token=int(normviz.attribution.actual_next(s, 2)))
    figs = by_kind(at)
    proportional(arr(figs["signed_bars"]["data"][0]["y"]), list(e.sources) + [e.bias])
    assert len(e.sources) == e.n_source + len(s.tgt_tokens)
    assert arr(figs["lens"]["data"][0]["y"])[-1] == pytest.approx(float(np.exp(s.logit_lens(2)[-1, e.token])), rel=1e-4)
