"""Issue 39: the Why page's Continuation view on smollm2 — the steps × tokens heatmap is the library's
``explain_continuation`` (every cell), a step picked opens that step's Why panels (the text + continuation at the
step's position, its own token explained), the URL keeps the continuation; minilm says it is not a decoder."""

from __future__ import annotations

import json

import numpy as np

import normviz
from normviz.ui.kit import st_parts
from normviz.viz.theme import DARK_MASKED, DARK_MID

from ..helpers.app import app, no_exception, texts, z
from ..helpers.colours import DARK, colour_at, contrast
from ..helpers.why import PAGE, TEXT, by_kind, smollm2


def test_continuation_view_draws_the_librarys_numbers_and_walks_steps():
    at = app(PAGE, {"model": "smollm2", "text": TEXT, "steps": "6", "cfoil": "runner-up"})
    at.run()
    no_exception(at)
    c = normviz.Session(smollm2(), TEXT).explain_continuation(6, foil="runner-up")
    heat = by_kind(at)["continuation"]
    got = z(heat)
    assert got.shape == c.sources.shape
    assert np.array_equal(np.isnan(got), np.isnan(c.sources))
    np.testing.assert_allclose(
        got[~np.isnan(got)], c.sources[~np.isnan(c.sources)], rtol=1e-5, atol=1e-6 * np.nanmax(np.abs(c.sources))
    )
    picker = at.get("button_group")[0] if at.get("button_group") else None
    assert picker is not None
    # step 0's panels: the page explains position n − 1 of text + continuation, the step's own token
    assert at.query_params["steps"] == "6" and at.query_params["cfoil"] == "runner-up"
    sb = {s.key: s for s in at.selectbox}
    assert sb["w_why_pos"].value == int(c.positions[0])
    # pick step 3: the position follows, and the explained token is the step's
    at.session_state["w_why_cont_step"] = 3
    at.session_state["w_why_pos"] = int(c.positions[3])
    at.run()
    no_exception(at)
    sb = {s.key: s for s in at.selectbox}
    assert sb["w_why_pos"].value == int(c.positions[3])
    assert sb["w_why_token"].value == int(c.generated_ids[3])
    heat = by_kind(at)["continuation"]
    assert heat["layout"]["meta"]["focus"] == 3
    assert at.query_params["position"] == str(int(c.positions[3]))


def test_minilm_says_it_is_not_a_decoder():
    at = app(PAGE, {"model": "minilm", "text": TEXT, "steps": "3"})
    at.run()
    no_exception(at)
    said = " ".join(texts(at.info))
    assert "minilm is not a decoder" in said or "not a decoder" in said


def test_a_click_on_a_heatmap_row_opens_that_step(monkeypatch):
    """A click on any cell of the heatmap's row 4 (the browser's row_click.js sends the row; here its
    Python side is replaced) opens step 4: the step picker, the page's position and the explained token follow,
    and the heatmap outlines row 4. A row the continuation has not is ignored."""
    at = app(PAGE, {"model": "smollm2", "text": TEXT, "steps": "6"})
    at.run()
    no_exception(at)
    c = normviz.Session(smollm2(), TEXT).explain_continuation(6)
    assert at.session_state["w_why_cont_step"] == 0
    sent = {"row": 4}
    monkeypatch.setattr(st_parts, "row_clicks", lambda chart, key="": sent["row"] if chart == "continuation" else None)
    at.run()
    no_exception(at)
    sb = {s.key: s for s in at.selectbox}
    assert at.session_state["w_why_cont_step"] == 4
    assert sb["w_why_pos"].value == int(c.positions[4])
    assert sb["w_why_token"].value == int(c.generated_ids[4])
    assert by_kind(at)["continuation"]["layout"]["meta"]["focus"] == 4
    assert at.query_params["position"] == str(int(c.positions[4]))
    sent["row"] = 99  # no such step: the page stays on step 4
    at.run()
    no_exception(at)
    assert at.session_state["w_why_cont_step"] == 4
    assert {s.key: s for s in at.selectbox}["w_why_pos"].value == int(c.positions[4])


def test_the_encoder_decoder_branch_explains_the_whole_translation(monkeypatch):
    """toy-mt (an encoder–decoder): the heatmap is the library's ``explain_continuation()`` of the session's own
    translation (each target token over source + earlier target tokens); a click on row 2 picks target word 2."""
    src = "the big dog often sees a small red car"
    at = app(PAGE, {"model": "toy-mt", "text": src, "steps": "1"})
    at.run()
    no_exception(at)
    lm = st_parts.model_cache().get_or_compute("toy-mt", lambda: normviz.load("toy-mt"))
    s = normviz.Session(lm, src)
    c = s.explain_continuation()
    assert c.n_source == len(s.src_tokens) and len(c) >= 3
    got = z(by_kind(at)["continuation"])
    assert got.shape == c.sources.shape and np.array_equal(np.isnan(got), np.isnan(c.sources))
    np.testing.assert_allclose(
        got[~np.isnan(got)], c.sources[~np.isnan(c.sources)], rtol=1e-6, atol=1e-7 * np.nanmax(np.abs(c.sources))
    )
    assert at.selectbox(key="w_why_pos").value == 0
    monkeypatch.setattr(st_parts, "row_clicks", lambda chart, key="": 2)
    at.run()
    no_exception(at)
    assert at.selectbox(key="w_why_pos").value == 2 and at.query_params["position"] == "2"
    assert by_kind(at)["continuation"]["layout"]["meta"]["focus"] == 2


def test_the_translation_heatmap_is_drawn_in_the_dark_colours_on_a_dark_link():
    """toy-mt's translation heatmap on a ``theme=dark`` link: its scale's centre and its masked cells are the dark
    twins (:mod:`normviz.viz.theme`), as the decoder's continuation heatmap in the browser test; a light link keeps
    the light ones. The figure the app sends is read back (AppTest: the link's theme is the figures')."""
    src = "the big dog often sees a small red car"
    looks = {}
    for theme in ("dark", "light"):
        at = app(PAGE, {"model": "toy-mt", "text": src, "steps": "1", "theme": theme})
        at.run()
        no_exception(at)
        fig = by_kind(at)["continuation"]
        heat = fig["data"][0]
        masked = [d for d in fig["data"] if (d.get("meta") or {}).get("role") == "masked"]
        assert masked, [d.get("meta") for d in fig["data"]]
        looks[theme] = (
            json.dumps(heat["colorscale"]),
            json.dumps(masked[0]["colorscale"]),
            fig["layout"]["plot_bgcolor"],
        )
    scale, masked, bg = looks["dark"]
    assert DARK_MID in scale and DARK_MASKED in masked and bg == DARK_MASKED, looks["dark"]
    scale, masked, bg = looks["light"]
    assert DARK_MID not in scale and DARK_MASKED not in masked and bg != DARK_MASKED, looks["light"]
    assert contrast(colour_at(json.loads(looks["dark"][0]), 0.5), DARK) < 1.6  # the centre (0) near the dark page
