"""Issue 39: the Why page's Continuation view on smollm2 — the steps × tokens heatmap is the library's
``explain_continuation`` (every cell), a step picked opens that step's Why panels (the text + continuation at the
step's position, its own token explained), the URL keeps the continuation; minilm says it is not a decoder."""
from __future__ import annotations

import numpy as np

import normviz

from ..helpers.app import app, no_exception, texts, z
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
    np.testing.assert_allclose(got[~np.isnan(got)], c.sources[~np.isnan(c.sources)], rtol=1e-5,
                               atol=1e-6 * np.nanmax(np.abs(c.sources)))
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
