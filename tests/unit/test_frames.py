"""Explore's frames (normviz.ui.kit.frames): what the browser draws at once for a new layer or head must be what
the server then draws for that layer and head (the heatmap the page builds), at the frames' 4 digits."""

from __future__ import annotations

import numpy as np
import plotly.colors
import pytest

import normviz
from normviz import viz
from normviz.ui.kit import data, frames

from ..helpers import tiny
from ..helpers.app import arr

KEYS = ["attention", "norm", "attn_res", "attn_res_ln"]


def _decode(z) -> np.ndarray:
    return np.array([[np.nan if v is None else v for v in row] for row in z], float)


def _server_heatmap(a, keys, layer, head, *, hide, values, shared, threshold, causal):
    """The figures the Explore page draws for (layer, head): its own code path."""
    panels = data.build_panels(a, keys, layer, head, hide, values)
    ranges = data.color_range(panels, shared)
    return {
        p.key: viz.heatmap(
            data.thresholded(p.matrix, threshold),
            p.row_labels,
            title=p.title,
            zmin=lo,
            zmax=hi,
            positions=p.index,
            causal=causal,
        ).to_plotly_json()
        for p, (lo, hi) in zip(panels, ranges)
    }


@pytest.mark.parametrize(
    "arch, hide, values, shared, threshold",
    [
        ("bert", False, "share", True, 0.0),
        ("bert", True, "raw", False, 0.2),
        ("gpt2", False, "share", False, 0.0),
        ("gpt2", True, "share", True, 0.1),
    ],
)
def test_every_frame_is_the_heatmap_the_server_draws_for_that_layer_and_head(
    tiny_model, arch, hide, values, shared, threshold
):
    lm = tiny_model(arch)
    session = normviz.Session.from_encoded(lm, [tiny.encoded(n=8, seed=3)])[0]
    a = session.get(KEYS)
    heads = [None] + list(range(lm.n_heads))
    wanted = frames.plan(a.n_tokens, len(KEYS), lm.n_layers, heads, layer=1, head=0, limit=10**9)
    assert set(wanted) == {(layer, 0) for layer in range(lm.n_layers)} | {(1, h) for h in heads}
    got = frames.panel_frames(
        a, KEYS, wanted, hide_special=hide, values=values, shared_scale=shared, threshold=threshold, causal=lm.is_causal
    )
    for layer, head in wanted:
        server = _server_heatmap(
            a, KEYS, layer, head, hide=hide, values=values, shared=shared, threshold=threshold, causal=lm.is_causal
        )
        for key in KEYS:
            f = got[key][frames.frame_name(layer, head)]
            want = server[key]["data"][0]
            mine, theirs = _decode(f["restyle"]["z"][0]), arr(want["z"])
            assert mine.shape == theirs.shape
            assert (np.isnan(mine) == np.isnan(theirs)).all()  # masked / hidden cells alike
            ok = ~np.isnan(theirs)
            np.testing.assert_allclose(mine[ok], theirs[ok], rtol=5e-4, atol=1e-300)
            assert f["restyle"]["zmin"] == [want["zmin"]] and f["restyle"]["zmax"] == [want["zmax"]]
            named = plotly.colors.get_colorscale(f["restyle"]["colorscale"][0])
            assert [(round(v, 9), c) for v, c in named] == [(round(v, 9), c) for v, c in want["colorscale"]]
            assert f["title"] == server[key]["layout"]["title"]["text"]
    if lm.is_causal:  # the decoder's upper triangle is masked in every frame
        z0 = _decode(got["attention"]["1:-1"]["restyle"]["z"][0])
        assert np.isnan(z0[np.triu_indices_from(z0, 1)]).all()


def test_fx_frames_are_the_strip_of_each_layer_and_head(tiny_model):
    lm = tiny_model("bert")
    session = normviz.Session.from_encoded(lm, [tiny.encoded(n=7, seed=2)])[0]
    keep = [0, 2, 3, 5]
    wanted = [(0, None), (1, None), (1, 2)]
    got = frames.fx_frames(lambda layer: normviz.transformed_norms(session, layer), keep, wanted)
    for layer, head in wanted:
        vals, what = data.fx_strip(normviz.transformed_norms(session, layer), head, keep)
        f = got[frames.frame_name(layer, head)]
        np.testing.assert_allclose(f["restyle"]["y"][0], vals, rtol=5e-4)
        assert f["title"] == what


def test_plan_falls_back_to_layers_then_to_nothing():
    heads = [None, 0, 1, 2, 3]
    cells = 4 * 10 * 10
    assert len(frames.plan(10, 4, 6, heads, 2, None, limit=cells * 10)) == 6 + 4  # layers + the other heads
    assert frames.plan(10, 4, 6, heads, 2, None, limit=cells * 9) == [(layer, None) for layer in range(6)]
    assert frames.plan(10, 4, 6, heads, 2, None, limit=cells * 5) == []


def test_budget_reads_the_environment(monkeypatch):
    monkeypatch.setenv("NORMVIZ_INSTANT_CELLS", "0")
    assert frames.plan(5, 1, 2, [None], 0, None) == []
    monkeypatch.setenv("NORMVIZ_INSTANT_CELLS", "not a number")
    assert frames.budget() == frames.DEFAULT_BUDGET


def test_compact_keeps_four_significant_digits_zeros_and_gaps():
    m = np.array([[0.123456, 1234.5678, 0.0], [np.nan, -3.2e-7, 1.0]])
    out = frames.compact(m)
    assert out[0][0] == 0.1235 and out[0][1] == 1235.0 and out[0][2] == 0.0
    assert out[1][0] is None and out[1][1] == pytest.approx(-3.2e-7) and out[1][2] == 1.0
