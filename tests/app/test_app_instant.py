"""Explore hands the browser frames so that a layer or head change is drawn at once (normviz.ui.kit.frames,
st_parts.instant_switch); AppTest runs no JS, so these check what the page sends: the frame of the view
shown equals the figure drawn, the frames cover the next layer and head change, and views whose other
charts depend on the layer get none."""

from __future__ import annotations

import json

import numpy as np

from normviz.ui.kit.frames import frame_name

from ..helpers.app import heatmaps, no_exception, title, z


def sent(at) -> dict | None:
    text = at.session_state["_normviz_instant"]
    return None if text is None else json.loads(text)


def panels(at) -> list[dict]:
    return [f for f in heatmaps(at) if " · " in title(f)]


def _decode(zz) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in zz], float)


def test_the_frame_of_the_view_shown_is_the_figure_drawn(at):
    frames = sent(at)
    keys = sorted(k for k in frames if k.startswith("panel_"))
    assert keys == sorted(["panel_attention", "panel_norm", "panel_attn_res", "panel_attn_res_ln"])
    assert "fx_norm" in frames  # the ‖f(x)‖ strip under the norm panel switches with it
    now = frame_name(0, None)
    for fig in panels(at):
        assert fig["layout"]["meta"]["frame"] == now
        key = next(k for k in keys if frames[k][now]["title"] == title(fig))
        mine, drawn = _decode(frames[key][now]["restyle"]["z"][0]), z(fig)
        ok = ~np.isnan(drawn)
        assert (np.isnan(mine) == ~ok).all()
        np.testing.assert_allclose(mine[ok], drawn[ok], rtol=5e-4)
        assert frames[key][now]["restyle"]["zmax"] == [fig["data"][0]["zmax"]]


def test_frames_cover_every_layer_and_every_head_and_recentre_after_a_change(at):
    names = set(sent(at)["panel_attention"])
    assert {frame_name(layer, None) for layer in range(6)} <= names
    assert {frame_name(0, h) for h in range(12)} <= names
    at.slider(key="w_layer").set_value(3).run()
    at.selectbox(key="w_head").set_value(5).run()
    no_exception(at)
    names = set(sent(at)["panel_attention"])
    assert {frame_name(layer, 5) for layer in range(6)} | {frame_name(3, h) for h in [None] + list(range(12))} <= names
    assert all(f["layout"]["meta"]["frame"] == "3:5" for f in panels(at))
    assert (
        title(panels(at)[0]) == sent(at)["panel_attention"]["3:5"]["title"] == "Attention weights α · layer 3, head 5"
    )


def test_views_with_other_layer_charts_wait_for_the_server(at):
    at.segmented_control(key="w_draw").set_value("lines").run()
    no_exception(at)
    assert sent(at) is None
    at.segmented_control(key="w_draw").set_value("heatmap").run()
    assert sent(at)
    at.selectbox(key="w_diff_a").set_value("attention").run()
    at.selectbox(key="w_diff_b").set_value("norm").run()
    no_exception(at)
    assert sent(at) is None  # the difference panel has no frames


def test_a_long_text_over_the_budget_sends_no_frames(monkeypatch):
    from ..helpers.app import app

    monkeypatch.setenv("NORMVIZ_INSTANT_CELLS", "1000")
    a = app(query={"text": "Dogs bark at the postman every single morning."})
    a.run()
    no_exception(a)
    assert a.session_state["_normviz_instant"] is None and len(panels(a)) == 4
