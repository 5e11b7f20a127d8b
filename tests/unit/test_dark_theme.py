"""Issue 29: the figures in a dark theme do not glare — a diverging scale's centre (a value 0, most of a head grid
or a difference map) is a grey near the dark page, not white; masked cells and frames are dark grey; the values
far from 0 are the bright ones; the routes graph's edges and nodes stand out from the dark page. Checked on the
plotly figure objects (no browser): :func:`normviz.viz.theme.for_theme`, which the app applies to every chart."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from normviz import viz
from normviz.viz import attend as va
from normviz.viz import corpus as vc
from normviz.viz import why as vw
from normviz.viz.depth import depth_heatmap
from normviz.viz.theme import for_theme

from ..helpers.colours import DARK, LIGHT, colour_at, contrast, luminance, over, rgb


def signed(n: int = 6, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, n))


def figures_with_a_centre():
    """Every figure the app draws with a diverging scale centred on 0 (name, figure)."""
    labels = [f"t{k}" for k in range(6)]
    stats = pd.DataFrame([{"layer": l, "head": h, "d": float(l - h)} for l in range(3) for h in range(4)])
    return [
        ("head grid", vw.head_grid(signed(6)[:4, :3], {"FF": np.ones(4), "b^O": np.full(4, np.nan)})),
        ("difference map", viz.difference(np.abs(signed()), np.abs(signed(seed=1)), labels, causal=True)),
        ("signed heatmap", viz.heatmap(signed(), labels, causal=True)),
        ("overview grid", viz.grid(signed(12).reshape(2, 2, 6, 6), labels)),
        ("depth map", depth_heatmap(signed(6)[:4], labels)),
        ("score split", va.score_split(labels, signed())),
        ("corpus heads", vc.head_heatmap(stats, "d")),
    ]


@pytest.mark.parametrize("name, fig", figures_with_a_centre())
def test_a_diverging_scale_is_centred_on_the_dark_page_not_white(name, fig):
    trace = fig.data[0]
    light_centre = colour_at(trace.colorscale, 0.5)
    assert contrast(light_centre, DARK) > 10, (name, light_centre)  # as built: white on a dark page
    for_theme(fig, "dark")
    scale = fig.data[0].colorscale
    centre = colour_at(scale, 0.5)
    assert contrast(centre, DARK) < 1.6, (name, centre)  # a value 0 is (almost) the page
    for t in (0.0, 1.0):  # the largest values are the brightest, readable on the dark page
        assert contrast(colour_at(scale, t), DARK) > 7, (name, t)
    lum = [luminance(over(colour_at(scale, t), DARK)) for t in np.linspace(0, 1, 21)]
    assert all(a >= b for a, b in zip(lum[:10], lum[1:11])), name  # brighter the further from 0 on both sides
    assert all(a <= b for a, b in zip(lum[10:], lum[11:])), name
    for_theme(fig, "light")  # both ways: a cached figure shown again in the light theme
    assert colour_at(fig.data[0].colorscale, 0.5) == light_centre


def test_masked_cells_and_frames_are_dark_grey_on_the_dark_page():
    fig = viz.heatmap(np.abs(signed()), [f"t{k}" for k in range(6)], causal=True)
    masked = [t for t in fig.data if (t.meta or {}).get("role") == "masked"]
    assert masked
    for_theme(fig, "dark")
    for colour in (masked[0].colorscale[0][1], masked[0].colorscale[-1][1], fig.layout.plot_bgcolor):
        r, g, b, a = rgb(colour)
        assert a == 1.0 and luminance((r, g, b)) < 0.06, colour  # opaque and dark: no grey veil over the page
        assert 1.3 < contrast(colour, DARK) < 3, colour  # still told apart from the page and from a 0 cell
    assert fig.data[0].colorscale == viz.heatmap(np.abs(signed()), [f"t{k}" for k in range(6)]).data[0].colorscale
    # (sequential scales such as Viridis stay: they are dark at 0 already)


def test_routes_graph_reads_on_the_dark_page():
    from tests.unit.test_why_figures import _routes

    routes = _routes(8)
    routes["edges"].append(
        {
            "source": "a0_1",
            "target": "x1_3",
            "kind": "head",
            "layer": 0,
            "head": 2,
            "from_token": 1,
            "to_token": 3,
            "weight": 0.7,
        }
    )
    fig = for_theme(vw.routes_graph(routes, font_size=20), "dark")
    lines = [d for d in fig.data if d.mode == "lines"]
    assert {d.name for d in lines} == {"residual", "attention head"}
    for d in lines:  # WCAG's 3:1 for graphics against the page
        assert contrast(d.line.color, DARK) >= 4.5, (d.name, d.line.color)
    node = fig.data[-1].marker
    assert contrast(node.color, DARK) >= 4.5
    light = for_theme(vw.routes_graph(routes, font_size=20), "light")
    for d in (d for d in light.data if d.mode == "lines"):
        assert contrast(d.line.color, LIGHT) >= 3, (d.name, d.line.color)


def test_bars_keep_their_meaning_and_lift_their_blue_on_the_dark_page():
    fig = for_theme(vw.signed_bars([1.0, -2.0, 0.5], ["a", "b", "c"]), "dark")
    colours = list(fig.data[0].marker.color)
    assert colours[1] == vw.NEG and colours[0] == colours[2] != vw.POS
    assert contrast(colours[0], DARK) >= 4.5 and contrast(vw.NEG, DARK) >= 3


def test_no_theme_or_an_unknown_one():
    fig = vw.head_grid(signed(6)[:4, :3], {})
    before = fig.to_json()
    assert for_theme(fig, None).to_json() == before and for_theme(fig, "").to_json() == before
    with pytest.raises(ValueError, match="light"):
        for_theme(fig, "sepia")


def test_trust_intervals_read_on_both_pages():
    from normviz.viz import trust as vt

    fig = for_theme(
        vt.score_bars(
            ["sources", "attention", "random"],
            [0.2, 0.1, 0.0],
            [0.15, 0.05, -0.05],
            [0.25, 0.15, 0.05],
            reference="attention",
        ),
        "dark",
    )
    whisker = fig.data[0].error_x.color
    assert whisker is not None  # plotly's default #444: 1.9:1 on the dark page, the intervals vanished
    assert contrast(whisker, DARK) >= 3 and contrast(whisker, LIGHT) >= 3


def test_alignment_word_dots_read_on_both_pages():
    from normviz.viz.alignment import alignment_figure

    fig = for_theme(alignment_figure(["the", "cat"], ["mao", "inu"], [(0, 1), (1, 0)]), "dark")
    dots = [d for d in fig.data if d.mode == "markers+text"]
    assert dots
    for d in dots:  # #444 (1.9:1 on the dark page) hid the words' dots
        assert contrast(d.marker.color, DARK) >= 3 and contrast(d.marker.color, LIGHT) >= 3, d.marker.color
