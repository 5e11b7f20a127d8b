"""Issue 21: the Why page on smollm2 — each chart's numbers against normviz's own (Session.predict / explain /
logit_lens, normviz.routes), up to one positive scale; a head cell's click lands on Explore at that head."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
import normviz.methods.sinks
from normviz.ui.kit import st_parts
from normviz.viz.why import txt

from ..helpers.app import app, arr, figures, no_exception, texts, title
from ..helpers.why import PAGE, TEXT, by_kind, smollm2


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


def test_every_chart_equals_normviz_numbers(why_page):
    no_exception(why_page)
    figs = by_kind(why_page)
    assert {"candidates", "signed_bars", "head_grid", "lens", "routes", "sinks"} <= set(figs)
    s = normviz.Session(smollm2(), TEXT)
    cands = s.predict(top=10)
    e = s.explain()
    # (1) the top candidate's text, its probability as the longest bar
    bars = figs["candidates"]["data"][0]
    assert list(bars["customdata"])[0] == txt(cands[0].token)
    np.testing.assert_allclose(arr(bars["x"]), [c.prob for c in cands], rtol=1e-5)
    # (2) sources (+ bias) and the sentence saying they equal the model's logit
    src = sources_chart(why_page)
    proportional(arr(src["data"][0]["y"]), list(e.sources) + [e.bias])
    assert any("they are equal" in t and f"{e.total:.4f}" in t for t in texts(why_page.caption))
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


def test_a_foil_and_an_earlier_position(why_page):
    cands = normviz.Session(smollm2(), TEXT).predict(top=10)
    why_page.selectbox(key="w_why_foil").set_value(cands[1].id).run()
    no_exception(why_page)
    assert why_page.query_params["foil"] == cands[1].token
    e = normviz.Session(smollm2(), TEXT).explain(foil=cands[1].id)
    src = sources_chart(why_page)
    proportional(arr(src["data"][0]["y"]), list(e.sources) + [e.bias])
    why_page.selectbox(key="w_why_foil").set_value("(none)").run()
    why_page.selectbox(key="w_why_pos").set_value(2).run()  # "The capital of" → its own next token " France"
    no_exception(why_page)
    assert why_page.query_params["position"] == "2"
    token = why_page.selectbox(key="w_why_token")
    assert "France" in str(token.format_func(token.value))


def test_clicking_a_head_cell_shows_why_it_attends(monkeypatch):
    """Issue 33: a click on the grid's cell (layer 3, head 2) puts that head in the boxes and draws why it attends
    from the explained position to the token it carried most: its score split, equal to Session.attend's."""
    at = app("app.py", {"model": "smollm2", "text": TEXT})
    at.run()
    at.switch_page(PAGE)
    at.run()
    no_exception(at)
    monkeypatch.setattr(st_parts, "grid_clicks", lambda charts, cell: {"layer": 3, "head": 2, "chart": "why_heads"})
    at.run()
    no_exception(at)
    assert at.number_input(key="w_why_layer").value == 3 and at.number_input(key="w_why_head").value == 2
    figs = by_kind(at)
    assert "score_split" in figs and "attribution_graph" in figs
    s = normviz.Session(smollm2(), TEXT)
    e = s.explain()
    n = len(s.tokens)
    key = int(np.argmax(np.abs(e.heads[3, 2])))
    assert at.selectbox(key="w_why_key").value == key
    want = s.attend(3, 2, query=n - 1, key=key).grouped(by="layer")[1]
    np.testing.assert_allclose(
        arr(figs["score_split"]["data"][0]["z"]).astype(float), want, rtol=0, atol=1e-5 * np.abs(want).max()
    )
    assert "layer 3 head 2" in title(figs["score_split"])


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


# ---- issue 29: a new prompt is explained at its own last position
PROMPTS = [
    "The capital of France is",
    "Water boils at one hundred degrees when the pressure is",
    "My dog",
    "Yesterday the old fisherman walked slowly down to the harbour at",
]  # longer, shorter, longer


def _explained(at) -> str:
    return title(by_kind(at)["candidates"])


def test_a_new_prompt_explains_its_last_position():
    at = app(PAGE, {"model": "smollm2", "text": PROMPTS[0]})
    at.run()
    no_exception(at)
    for text in PROMPTS[1:]:
        at.text_input(key="w_text").set_value(text).run()
        no_exception(at)
        labels = normviz.Session(smollm2(), text).labels
        n = len(labels)
        assert at.selectbox(key="w_why_pos").value == n - 1, (text, at.selectbox(key="w_why_pos").value)
        assert f"[{n - 1}]" in _explained(at), (text, _explained(at))
        assert "position" not in at.query_params or at.query_params["position"] == "last"
        assert not texts(at.warning), texts(at.warning)  # nothing clamped: no note to give


def test_an_earlier_position_then_a_new_prompt_goes_to_its_last():
    at = app(PAGE, {"model": "smollm2", "text": PROMPTS[1]})
    at.run()
    at.selectbox(key="w_why_pos").set_value(4).run()
    assert "[4]" in _explained(at)
    at.text_input(key="w_text").set_value(PROMPTS[2]).run()  # shorter than 5 tokens
    no_exception(at)
    n = len(normviz.Session(smollm2(), PROMPTS[2]).labels)
    assert at.selectbox(key="w_why_pos").value == n - 1
    assert f"[{n - 1}]" in _explained(at)


# ---- issue 29: the sinks panel per layer, on long texts too, and a word when it is not drawn
LONG = " ".join(["the river carried small boats past the old mill while children counted them"] * 16)


def test_sinks_are_drawn_on_a_text_whose_whole_maps_do_not_fit(monkeypatch):
    """At the least memory budget (64 MB) smollm2's whole attention and norm maps of ~200 tokens (2 × 43 MB)
    are refused: the panel was left out without a word; now it is computed one layer at a time."""
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "256")
    monkeypatch.setenv("NORMVIZ_MEMORY_BUDGET_MB", "64")
    monkeypatch.setenv("NORMVIZ_COST_BUDGET", "5")  # sources and routes refused (fast); the sinks fit
    at = app(PAGE, {"model": "smollm2", "text": LONG})
    at.run()
    no_exception(at)
    figs = by_kind(at)
    assert "sinks" in figs, [texts(at.warning)]
    s = normviz.Session(smollm2(), LONG)
    assert s.n_tokens > 176  # 2 whole maps over 64 MB
    wa, wn = normviz.methods.sinks.first_token_shares(s)
    dots = figs["sinks"]["data"][1]
    np.testing.assert_allclose(arr(dots["x"]), wa.ravel(), rtol=1e-6)
    np.testing.assert_allclose(arr(dots["y"]), wn.ravel(), rtol=1e-6)


def test_sinks_over_the_cost_budget_say_so(monkeypatch):
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "256")
    monkeypatch.setenv("NORMVIZ_COST_BUDGET", "0.1")
    at = app(PAGE, {"model": "smollm2", "text": LONG})
    at.run()
    no_exception(at)
    assert "sinks" not in by_kind(at)
    assert any(t.startswith("Attention sinks") and "tokens" in t for t in texts(at.warning)), texts(at.warning)


# ---- issue 29: silent changes on Why (and Learn's lesson) said
def test_a_foil_equal_to_the_token_is_said():
    cands = normviz.Session(smollm2(), TEXT).predict(top=10)
    at = app(PAGE, {"model": "smollm2", "text": TEXT, "foil": cands[0].token})  # the default token itself
    at.run()
    no_exception(at)
    assert any("is the token being explained" in t for t in texts(at.info)), texts(at.info)
    assert "foil" not in at.query_params or not at.query_params["foil"]


def test_toy_mt_in_public_mode_gives_one_consistent_story(monkeypatch):
    monkeypatch.setenv("NORMVIZ_PUBLIC", "1")
    at = app(PAGE, {"model": "toy-mt", "text": "the big dog often sees a small red car"})
    at.run()
    no_exception(at)
    notes = texts(at.info) + texts(at.warning) + texts(at.error)
    assert not any("shows minilm instead" in t or "no language-model head" in t for t in notes), notes
    assert at.selectbox(key="w_model_choice").value == "toy-mt"
    assert any(t.startswith("Source:") for t in texts(at.caption))  # the encoder–decoder's explanation


def test_learn_says_an_unknown_lesson():
    at = app("app_pages/2_Learn.py", {"lesson": "<b>nonsense</b>"})
    at.run()
    no_exception(at)
    notes = texts(at.warning)
    assert any("lesson='<b>nonsense</b>' is not a lesson" in t and "attention" in t for t in notes), notes
