"""AppTest runs of issue 13's controls on Explore, Overview and Learn (embedded minilm; smollm2 once)."""

from __future__ import annotations

import json

import numpy as np

import normviz
import normviz.viz
from normviz.ui.kit import data, pickers, st_parts
from normviz.ui.views import learn

from ..helpers.app import app, arr, figures, heatmaps, no_exception, texts, title, z

N = 13  # [CLS] the cat sat on the mat because it was tired . [SEP]


def panels(at) -> list[dict]:
    return [f for f in heatmaps(at) if " · " in title(f)]


def bars(at) -> list[dict]:
    return [f for f in figures(at) if f["data"] and f["data"][0]["type"] == "bar"]


def test_map_picker_is_grouped_with_short_labels(at):
    groups = {p.label: p for p in at.sidebar.get("button_group")}
    assert list(groups) == ["Per layer", "Across layers", "Alternatives"]
    per_layer = at.pills(key="w_maps")
    assert "attention" in per_layer.options or "α weights" in per_layer.options
    assert all(len(o) <= 22 for o in per_layer.options)
    at.pills(key="w_maps_across").set_value(["rollout_attention"]).run()
    no_exception(at)
    assert title(panels(at)[-1]).startswith("Attention rollout ·")
    assert "rollout_attention" in at.query_params["maps"]


def test_all_heads_shows_norm_once_and_says_why(at):
    at.pills(key="w_maps").set_value(["attention", "norm", "norm_layer"]).run()
    no_exception(at)
    assert [title(f).split(" · ")[0] for f in panels(at)] == ["Attention weights α", "Norm, heads summed ‖Σ_h α f(x)‖"]
    said = " ".join(c.value for c in at.caption)
    assert "shown once" in said and "All heads" in said
    at.selectbox(key="w_head").set_value(4).run()
    assert len(panels(at)) == 3  # one head: norm differs from the layer's


def test_heads_summed_pill_says_it_is_the_norm_map_at_all_heads(at):
    """Issue 23: at "all heads" the ‖Σαf‖ pill seemed to do nothing (it is ‖αf‖ there): its label and help say so,
    and at one head it is the plain pill again."""
    pill = at.pills(key="w_maps")
    assert pickers.ALL_HEADS_SAME in pill.options and "‖Σαf‖ heads summed" not in pill.options
    assert "same map" in pill.help
    at.selectbox(key="w_head").set_value(2).run()
    no_exception(at)
    pill = at.pills(key="w_maps")
    assert "‖Σαf‖ heads summed" in pill.options and pickers.ALL_HEADS_SAME not in pill.options
    assert "same map" not in pill.help


def test_every_panel_has_a_caption_and_a_learn_link(at):
    said = texts(at.caption)
    for key in ("attention", "norm", "attn_res", "attn_res_ln"):
        assert learn.caption(key) in said
    links = [e for e in at.get("link_button")] + [e for e in at.get("page_link")]
    assert len(links) >= 4


def test_lines_view_and_threshold(at):
    at.segmented_control(key="w_draw").set_value("lines").run()
    no_exception(at)
    figs = [f for f in figures(at) if f["data"] and f["data"][0]["type"] == "scatter"]
    assert len(figs) >= 4 and not panels(at)
    assert at.query_params["draw"] == "lines"
    at.segmented_control(key="w_draw").set_value("heatmap").run()
    full = z(panels(at)[0])
    at.slider(key="w_threshold").set_value(0.5).run()
    no_exception(at)
    cut = z(panels(at)[0])
    kept = np.isfinite(cut)
    assert 0 < kept.sum() < np.isfinite(full).sum()
    assert np.nanmin(np.abs(cut)) >= 0.5 * np.nanmax(np.abs(full)) - 1e-9
    assert at.query_params["threshold"] == "0.5"


def test_difference_panel_is_a_minus_b_of_row_shares(at):
    at.sidebar.selectbox(key="w_diff_a").set_value("attention").run()
    at.sidebar.selectbox(key="w_diff_b").set_value("norm").run()
    no_exception(at)
    diff = [f for f in heatmaps(at) if "−" in title(f)]
    assert len(diff) == 1
    a, n = z(panels(at)[0]), z(panels(at)[1])
    assert np.allclose(z(diff[0]), data.row_shares(a) - data.row_shares(n), atol=1e-6)
    assert at.query_params["diff"] == "attention,norm"


def test_fx_strip_under_the_norm_panel_holds_transformed_norms(at):
    lm = st_parts.model_cache().get("minilm")
    strip = [f for f in bars(at) if "f(x_j)" in f["layout"]["title"]["text"]]
    assert len(strip) == 1
    want = normviz.transformed_norms(normviz.Session(lm, "The cat sat on the mat because it was tired."), 0).mean(0)
    assert np.allclose(arr(strip[0]["data"][0]["y"]), want, rtol=1e-4)
    at.sidebar.toggle(key="w_fx").set_value(False).run()
    assert not [f for f in bars(at) if "f(x_j)" in f["layout"]["title"]["text"]]
    assert at.query_params["fx"] == "0"


def test_layer_player_has_a_frame_per_layer(at):
    at.sidebar.selectbox(key="w_player").set_value("norm").run()
    no_exception(at)
    player = [f for f in figures(at) if f.get("frames")]
    assert len(player) == 1 and len(player[0]["frames"]) == 6
    assert at.query_params["player"] == "norm"


def test_difference_and_player_are_panels_the_size_of_the_main_ones():
    """Issue 23: the difference panel is full-size (a main panel's width) and the player is not a half-width
    afterthought: both sit side by side in one row of panel columns, each with its explanation under it."""
    at = app(query={"diff": "attention,norm", "player": "norm", "present": "1"})
    at.run()
    no_exception(at)
    main = panels(at)[0]
    diff = [f for f in heatmaps(at) if "−" in title(f)][0]
    player = [f for f in figures(at) if f.get("frames")][0]
    assert diff["layout"]["width"] == main["layout"]["width"] == player["layout"]["width"]
    holders = []
    for k, col in enumerate(at.columns):
        specs = [json.loads(c.proto.spec) for c in col.get("plotly_chart")]
        if any(f is not None and f["layout"]["title"]["text"] == title(diff) for f in specs):
            holders.append(("diff", k))
        if any(f.get("frames") for f in specs):
            holders.append(("player", k))
        if any(t.startswith("Difference A − B:") for t in texts(col.get("caption"))):
            holders.append(("diff caption", k))
    got = dict(holders)
    assert got["player"] == got["diff"] + 1 and got["diff caption"] == got["diff"], holders  # one row: diff | player


def test_focus_token_outlines_it_in_every_panel(at):
    at.pills(key="w_focus").set_value(2).run()
    no_exception(at)
    for f in panels(at):
        rects = [s for s in f["layout"].get("shapes", []) if s["type"] == "rect"]
        assert any(abs(s["y0"] - 1.5) < 1e-9 for s in rects) and any(abs(s["x0"] - 1.5) < 1e-9 for s in rects)


def test_compare_two_texts_side_by_side(at):
    at.sidebar.radio(key="w_compare").set_value("text").run()
    at.sidebar.text_input(key="w_text_b").set_value("Cats purr.").run()
    no_exception(at)
    ps = panels(at)
    assert len(ps) == 8  # the four maps, left and right
    m = normviz.Session(st_parts.model_cache().get("minilm"), "Cats purr.").n_tokens
    assert z(ps[0]).shape == (N, N) and z(ps[1]).shape == (m, m) and m != N
    assert [title(f) for f in ps[::2]] == [title(f) for f in ps[1::2]]  # same map, layer, head
    assert at.query_params["compare"] == "text" and at.query_params["text_b"] == "Cats purr."


def test_compare_two_models_clamps_the_layer_with_a_note():
    at = app(query={"layer": "5", "compare": "model", "model_b": "smollm2"})
    at.run()
    no_exception(at)
    ps = panels(at)
    assert len(ps) == 8 and "layer 5" in title(ps[0]) and "layer 5" in title(ps[1])
    assert ps[1]["layout"]["yaxis"]["ticktext"][:2] == ["The", " cat"]


def test_comparing_models_starts_on_a_model_other_than_the_main_one():
    at = app(query={"model": "smollm2", "compare": "model", "text": "The cat sat."})
    at.run()
    no_exception(at)
    assert at.sidebar.selectbox(key="w_model_b").value == "minilm"


def test_html_download_is_offline_and_holds_every_panel(at):
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Download HTML" in labels
    figs = [
        normviz.viz.heatmap(np.eye(3), ["a", "b", "c"], title="one"),
        normviz.viz.heatmap(np.ones((3, 3)), ["a", "b", "c"], title="two"),
    ]
    html = st_parts.view_html(figs, ["x", "y"], "minilm", st_parts.ViewState(text="<b>hi</b>"))().decode()
    assert "<script src=" not in html and "plotly" in html.lower()
    assert "one" in html and "two" in html and "<b>hi</b>" not in html


def test_new_view_fields_round_trip_and_bad_values_are_noted():
    from normviz.ui.kit.state import ViewState

    v = ViewState(
        draw="lines",
        threshold=0.25,
        diff=("attention", "norm"),
        fx=False,
        compare="text",
        text_b="Other.",
        player="norm",
        lesson="flow",
    )
    assert ViewState.from_query(v.to_query()) == v
    bad = ViewState.from_query({"draw": "x", "threshold": "2", "diff": "norm,norm", "compare": "z"})
    # a threshold out of range is clamped to it (0 … 0.9), with a note; the others fall back
    assert len(bad.problems) == 4 and bad.threshold == 0.9 and bad.diff == () and bad.draw == "heatmap"


def test_overview_zooms_into_a_head_and_links_it_to_explore():
    at = app("app_pages/1_Overview.py", query={"text": "Hello there."})
    at.run()
    no_exception(at)
    at.number_input(key="w_ov_layer").set_value(3).run()
    at.number_input(key="w_ov_head").set_value(7).run()
    no_exception(at)
    zoom = [f for f in heatmaps(at) if " · " in title(f)]
    assert len(zoom) == 1 and title(zoom[0]) == "Attention weights α · layer 3, head 7"
    assert zoom[0]["layout"]["yaxis"]["ticktext"][1] == "hello"  # token labels
    assert at.query_params["layer"] == "3" and at.query_params["head"] == "7"
    links = [e.proto for e in at.get("link_button")] + [e.proto for e in at.get("page_link")]
    assert any("layer 3, head 7" in getattr(p, "label", "") for p in links)


def test_overview_head_link_through_navigation_opens_explore_there():
    at = app("app.py", query={"text": "Hello there."})
    at.run()
    at.switch_page("app_pages/1_Overview.py")
    at.run()
    at.number_input(key="w_ov_layer").set_value(2).run()
    at.number_input(key="w_ov_head").set_value(4).run()
    at.switch_page("app_pages/0_Explore.py")
    at.run()
    no_exception(at)
    assert at.slider(key="w_layer").value == 2 and at.selectbox(key="w_head").value == 4


def test_learn_has_a_tab_per_key_symbols_and_the_walk_through():
    at = app("app_pages/2_Learn.py", query={"text": "The cat sat on the mat.", "lesson": "flow"})
    at.run()
    no_exception(at)
    keys = normviz.all_keys("post", include_opt_in=True)
    assert len(at.tabs) == len(keys) + 2  # one per map key, the Why page's "Why this token", "Which map to trust"
    assert at.tabs[-2].label == learn.WHY_TAB
    from normviz.ui.views import trust

    assert at.tabs[-1].label == trust.TAB
    assert any("necessary" in m.value for m in at.tabs[-1].markdown)
    assert {"flow", "value_zeroing", "rollout_value_zeroing", "globenc", "effective_attention"} <= set(keys)
    symbols = at.table[0].value
    assert "α_ij (α^h_ij)" in symbols.index and "‖v‖" in symbols.index
    why = at.dataframe[0].value
    assert np.allclose(why[learn.PRODUCT], why[learn.MAP_COLUMN], rtol=1e-3, atol=1e-4)
    assert abs(why["α_ij"].sum() - 1) < 1e-3
    assert any("weight" in m for m in texts(at.info))


def test_learn_in_stage_mode_shows_its_tables_as_text_the_stage_css_enlarges():
    """Issue 23: Learn's tables stayed Streamlit's small canvas size in stage mode: there they are st.table (text,
    sized by the stage CSS, which also enlarges inputs), with the same numbers as the normal page's dataframes."""
    from normviz.ui.kit import style

    query = {"text": "The cat sat on the mat.", "lesson": "norm"}
    normal = app("app_pages/2_Learn.py", query=query)
    normal.run()
    stage = app("app_pages/2_Learn.py", query={**query, "present": "1"})
    stage.run()
    no_exception(stage)
    assert not stage.dataframe and len(stage.table) == len(normal.dataframe) >= 2
    why, why_stage = normal.dataframe[0].value, stage.table[0].value
    assert np.allclose(why[learn.MAP_COLUMN].to_numpy(), why_stage[learn.MAP_COLUMN].to_numpy())
    css = " ".join(h.proto.body for h in stage.get("html"))
    assert '[data-testid="stTable"] td' in css
    assert '[data-baseweb="select"]' in css and "textarea" in css
    assert style.font_size(True) > style.font_size(False)


def test_a_long_text_labels_every_kth_token_and_says_so():
    """A 100-token paragraph in a 2-panel row: the figure keeps its column's width (Streamlit would squeeze a
    wider one, leaving the square low in a tall figure), labels every k-th token, and a caption says so."""
    words = ("attention is not only a weight but the norm of the transformed vector matters as much " * 6).split()
    at = app(query={"text": " ".join(words[:90])})
    at.session_state["_normviz_width"] = 1240  # what the browser measures at 1280 px
    at.run()
    no_exception(at)
    hm = panels(at)
    step = hm[0]["layout"]["meta"]["label_step"]
    assert step >= 2 and len(hm[0]["layout"]["xaxis"]["ticktext"]) == -(-len(z(hm[0])) // step)
    assert all(f["layout"]["width"] <= 620 for f in hm)
    assert any(f"every {step}" in c.value for c in at.caption)
