"""Explore on a long text (issue 20): overviews of block max/mean, a zoom window at full resolution, token
search and focus, one layer computed at a time (AppTest on the embedded minilm, NORMVIZ_MAX_TOKENS=400)."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.methods import registry
from normviz.ui.kit import data, st_parts
from normviz.ui.views import long_maps
from normviz.viz.overview import overview

from ..helpers.app import app, arr, figures, no_exception, texts

SENTENCE = "The river rose in the night and the town woke to water in the streets. "
TEXT = SENTENCE * 19 + "A zebra crossed the bridge. " + SENTENCE * 3  # ~ 320 minilm tokens
WIDTH = 500  # the main column the browser would report: panels of 260 px, overviews of 96 blocks


@pytest.fixture
def long_at(monkeypatch):
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "400")
    calls = []
    for name, family in registry.families().items():

        def compute(inputs, keys, options, _real=family.compute, _name=name):
            calls.append((_name, tuple(keys), inputs.request.n_layers))
            return _real(inputs, keys, options)

        monkeypatch.setattr(family.module, "compute", compute)
    at = app(query={"text": TEXT, "layer": "1"})
    at.session_state["_normviz_width"] = WIDTH
    at.run()
    no_exception(at)
    return at, calls


def by_role(at, role):
    return [f for f in figures(at) if (f["layout"].get("meta") or {}).get("normviz") == role]


def zooms(at):
    return [f for f in figures(at) if "window" in (f["layout"].get("meta") or {})]


def reference(key, layer, head=None):
    """The panel's numbers computed apart from the app: row shares of Session.map."""
    lm = st_parts.model_cache().get_or_compute("minilm", lambda: normviz.load("minilm"))
    s = normviz.Session(lm, TEXT, max_tokens=400)
    return data.row_shares(s.map(key, layer, head)), s


def test_long_text_draws_overviews_of_block_max_and_mean(long_at):
    at, calls = long_at
    ovs, zs = by_role(at, "overview"), zooms(at)
    assert len(ovs) == 4 and len(zs) == 4
    assert at.session_state["_normviz_instant"] is None  # no instant-switch frames for long texts
    shown, s = reference("norm", 1)
    n = s.n_tokens
    assert long_maps.is_long(n) and n < 400
    cells = long_maps.overview_cells(260)
    want = overview(shown, cells)
    norm_ov = next(f for f in ovs if f["layout"]["title"]["text"].startswith("Norm"))
    assert "overview: max" in norm_ov["layout"]["title"]["text"]
    got = arr(norm_ov["data"][0]["z"])
    assert got.shape == want.max.shape == (cells, cells) and n > cells  # blocks of several tokens
    # drawn on the default contrast (log, issue 42 item 8): the library's block max through normviz.viz.contrast
    assert np.allclose(got, drawn(want.max), rtol=1e-5, atol=1e-7, equal_nan=True)
    # the zoom window at full resolution: the first 64 tokens, the same numbers
    zn = next(f for f in zs if f["layout"]["title"]["text"].startswith("Norm"))
    assert zn["layout"]["meta"]["window"] == [0, 64, 0, 64]
    assert np.allclose(arr(zn["data"][0]["z"]), shown[:64, :64], rtol=1e-5, atol=1e-7)
    # nothing whole was computed: every family call was for one layer
    assert calls and all(n_layers == 1 for _, _, n_layers in calls)
    assert {k for _, ks, _ in calls for k in ks} <= {"attention", "norm_layer", "attn_res", "attn_res_ln"}

    at.segmented_control(key="w_agg").set_value("mean").run()
    no_exception(at)
    norm_ov = next(f for f in by_role(at, "overview") if f["layout"]["title"]["text"].startswith("Norm"))
    assert "overview: mean" in norm_ov["layout"]["title"]["text"]
    assert np.allclose(arr(norm_ov["data"][0]["z"]), drawn(want.mean), rtol=1e-5, atol=1e-7, equal_nan=True)


def drawn(values):
    from normviz.ui.views.long_view import DEFAULT_SCALE
    from normviz.viz.contrast import rescale

    return rescale(values, DEFAULT_SCALE, 0.0, float(np.nanmax(values)))[0]


def test_layer_and_head_change_compute_only_that_layer(long_at):
    at, calls = long_at
    calls.clear()
    at.slider(key="w_layer").set_value(4).run()
    no_exception(at)
    assert calls and all(n_layers == 1 for _, _, n_layers in calls)
    att = next(f for f in by_role(at, "overview") if "Attention weights" in f["layout"]["title"]["text"])
    assert "layer 4" in att["layout"]["title"]["text"]
    shown, _ = reference("attention", 4, 2)
    at.selectbox(key="w_head").set_value(2).run()
    no_exception(at)
    att = next(f for f in zooms(at) if "Attention weights" in f["layout"]["title"]["text"])
    assert "head 2" in att["layout"]["title"]["text"]
    assert np.allclose(arr(att["data"][0]["z"]), shown[:64, :64], rtol=1e-5, atol=1e-7)


def test_search_range_and_drag_move_the_zoom_window(long_at):
    at, _ = long_at
    labels = list(reference("norm", 1)[1].labels)
    zebra = labels.index("zebra")
    at.text_input(key="w_find").input("Zebra").run()
    no_exception(at)
    assert at.session_state["w_focus"] == zebra
    w = zooms(at)[0]["layout"]["meta"]["window"]
    assert w[0] <= zebra < w[1] and w[2] <= zebra < w[3] and w[1] - w[0] == long_maps.WINDOW
    rows = by_role(at, "focus_rows")
    assert len(rows) == 1 and rows[0]["layout"]["meta"]["focus"] == zebra
    shown, _ = reference("norm", 1)
    trace = next(t for t in rows[0]["data"] if t["name"].startswith("Norm"))
    assert np.allclose(arr(trace["y"]), shown[zebra], rtol=1e-5, atol=1e-7)  # the focus token's row, in full

    at.text_input(key="w_range").input("100-163 / 0-31").run()
    no_exception(at)
    assert all(f["layout"]["meta"]["window"] == [100, 164, 0, 32] for f in zooms(at))
    at.slider(key="w_zoom_rows").set_value((10, 40)).run()
    no_exception(at)
    assert zooms(at)[0]["layout"]["meta"]["window"] == [10, 41, 0, 32]
    at.text_input(key="w_range").input("abc").run()
    no_exception(at)
    assert any("not a token range" in t for t in texts(at.error))
    at.text_input(key="w_find").input("qwxyz").run()
    assert any("No token holds" in t for t in texts(at.error))


def test_short_texts_keep_the_short_view(at):
    assert not by_role(at, "overview") and len(zooms(at)) == 0


def test_the_overview_contrast_control_redraws_the_overviews_and_says_the_scale(long_at):
    at, _ = long_at
    norm = lambda: next(f for f in by_role(at, "overview") if f["layout"]["title"]["text"].startswith("Norm"))  # noqa: E731
    # issue 42 item 8: log by default, said in the title, and it spreads the cells over more of the colours
    assert norm()["layout"]["title"]["text"].endswith("overview: max, log scale")

    def spread(fig):
        z = arr(fig["data"][0]["z"])
        lo, hi = fig["data"][0]["zmin"], fig["data"][0]["zmax"]
        return float(np.nanstd((z - lo) / (hi - lo)))

    default = spread(norm())
    at.selectbox(key="w_ov_scale").set_value("linear").run()
    assert norm()["layout"]["title"]["text"].endswith("overview: max, linear scale")
    assert default > 2 * spread(norm()), (default, spread(norm()))
    at.selectbox(key="w_ov_scale").set_value("quantile").run()
    no_exception(at)
    fig = norm()
    assert fig["layout"]["title"]["text"].endswith("overview: max, quantile scale")
    got = arr(fig["data"][0]["z"])
    assert np.nanmin(got) == 0.0 and np.nanmax(got) == 1.0 and fig["layout"]["meta"]["scale"] == "quantile"
