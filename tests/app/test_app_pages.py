"""AppTest runs of the Overview and Learn pages."""

from __future__ import annotations

import numpy as np

import normviz
from normviz.ui.kit import st_parts
from normviz.ui.views import learn

from ..helpers.app import app, arr, figures, heatmaps, no_exception, texts, title, z


def grids(at):
    """The layers × heads grids (the zoomed head's panel has ' · layer …' in its title)."""
    return [f for f in heatmaps(at) if " · " not in title(f)]


def test_overview_default_shows_two_grids_and_the_head_summary():
    at = app("app_pages/1_Overview.py")
    at.run()
    no_exception(at)
    hms = grids(at)
    assert [title(f).split("<br>")[0] for f in hms] == ["Attention weights α", "Norm ‖α f(x)‖"]
    assert all("<br>minilm: “The cat sat" in title(f) for f in hms)  # a PNG of a grid names its model and text
    n = 13
    assert z(hms[0]).shape == (6 * (n + 1) - 1, 12 * (n + 1) - 1)  # 6 layers × 12 heads
    scatter = [f for f in figures(at) if f["data"][-1]["type"] == "scatter"]
    assert len(scatter) == 1 and len(scatter[0]["data"][1]["text"]) == 72
    table = at.dataframe[0].value
    assert list(table.columns) == ["layer", "head", "weight → special", "norm → special", "gap", "open"]
    assert all(
        u.startswith("./?") and f"head={r.head}" in u and (r.layer == 0 or f"layer={r.layer}" in u)
        for u, r in zip(table["open"], table.itertuples())
    )  # each head opens on Explore
    assert (np.diff(table["gap"].to_numpy()) <= 1e-9).all()  # sorted, largest gap first
    assert [b.proto.label for b in at.get("download_button")] == [
        "Download the grids' numbers (NPZ)",
        "Per-head summary (CSV)",
    ]


def test_overview_map_choice_changes_the_grid():
    at = app("app_pages/1_Overview.py")
    at.run()
    first = z(grids(at)[0])
    at.selectbox(key="w_ov_map").set_value("attn_res_ln").run()
    no_exception(at)
    hms = grids(at)
    assert title(hms[0]).split("<br>")[0] == "Attention + residual + norm"
    assert z(hms[0]).shape == (6 * 14 - 1, 13)  # one column: a layer-level map
    assert z(hms[0]).shape != first.shape
    at.selectbox(key="w_ov_compare").set_value("(none)").run()
    assert len(grids(at)) == 1
    assert at.query_params["overview_map"] == "attn_res_ln"


def test_overview_restores_from_the_url():
    at = app(
        "app_pages/1_Overview.py",
        query={"text": "Hello there.", "overview_map": "norm_layer", "overview_compare": "ff"},
    )
    at.run()
    no_exception(at)
    assert [title(f).split("<br>")[0] for f in grids(at)] == ["Norm, heads summed ‖Σ_h α f(x)‖", "Feed-forward"]


def test_overview_empty_text_says_so():
    at = app("app_pages/1_Overview.py", query={"text": " "})
    at.run()
    no_exception(at)
    assert any("text is empty" in e for e in texts(at.error))


def test_learn_numbers_are_computed_from_the_model():
    at = app("app_pages/2_Learn.py")
    at.run()
    no_exception(at)
    keys = normviz.all_keys("post", include_opt_in=True)  # every key the engine offers a post-LN model
    assert len(at.latex) == len(keys) + len(learn.WHY_FORMULAS)  # a formula per map key, then the Why tab's
    assert len([f for f in heatmaps(at) if title(f).startswith("layer ")]) == len(keys)
    lm = st_parts.model_cache().get("minilm")
    a = normviz.analyze(lm, "cats")
    assert a.tokens == ["[CLS]", "cats", "[SEP]"]
    shown = at.dataframe[1].value.to_numpy()  # attention, layer 0, head 0 (0: the walk-through's row)
    assert np.allclose(shown, a.map("attention", 0, 0), atol=1e-4)
    norm_text = next(m for m in texts(at.markdown) if "recovers" in m)
    fx = a.map("norm", 0, 0)[0] / a.map("attention", 0, 0)[0]
    assert f"cats {fx[1]:.3f}" in norm_text
    at.slider(key="w_learn_layer").set_value(2).run()
    assert np.allclose(at.dataframe[1].value.to_numpy(), a.map("attention", 2, 0), atol=1e-4)


def test_learn_walk_through_draws_both_shares_under_one_title():
    """Seen in the stage screenshots: the walk-through drew two charts under the same title "Row of …"; now one
    chart, its two rows the weight's and the norm's shares of the row (each summing to 1)."""
    at = app("app_pages/2_Learn.py")
    at.run()
    no_exception(at)
    rows = [f for f in figures(at) if title(f).startswith("Row of")]
    assert len(rows) == 1, [title(f) for f in rows]
    names = [t["name"] for t in rows[0]["data"]]
    assert names == ["share of the weight α", "share of the norm ‖α f(x)‖"], names
    for t in rows[0]["data"]:
        assert abs(float(arr(t["y"]).sum()) - 1.0) < 1e-6


def test_overview_on_a_decoder_uses_the_first_token_as_the_sink():
    at = app("app_pages/1_Overview.py", query={"model": "smollm2", "text": "The cat sat on the mat."})
    at.run()
    no_exception(at)
    assert z(grids(at)[0]).shape[0] == 30 * (7 + 1) - 1  # 30 layers of 7 tokens
    assert any("attention sink" in c.value for c in at.caption)
    assert len(at.dataframe[0].value) == 12
