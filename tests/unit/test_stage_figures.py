"""Issue 29, seen in the stage screenshots (1280×800): the routes graph of a 5-token prompt squashed its rows to
~29 px and laid its legend over the layer numbers; the head grid drew the layer grid lines across the empty
column between the heads and the other parts; every axis label at the figure's own font (Streamlit's chart
theme otherwise sets 12-px ticks), without overriding the sizes a figure chose."""

from __future__ import annotations

import numpy as np
import pytest

from normviz.viz import why as vw

from .test_why_figures import _routes


@pytest.mark.parametrize("n, font_size", [(5, 18), (5, 22), (12, 18), (3, 12)])
def test_routes_rows_hold_their_room_and_the_legend_sits_below_the_axis(n, font_size):
    fig = vw.routes_graph(_routes(n), font_size=font_size)
    lay = fig.layout
    plot_h = lay.height - lay.margin.t - lay.margin.b
    assert plot_h / n >= max(30, 2 * font_size) - 1e-9, plot_h / n  # was 28.8 px at 5 tokens on stage
    assert lay.legend.yref == "container" and lay.legend.y == 0 and lay.legend.yanchor == "bottom"
    assert lay.margin.b >= 4 * font_size + 30  # ticks + the axis title + the legend


def test_head_grid_draws_no_grid_lines_across_its_gap():
    fig = vw.head_grid(np.ones((4, 3)), {"FF": np.ones(4)})
    assert fig.layout.yaxis.showgrid is False and fig.layout.xaxis.showgrid is False
    assert fig.layout.yaxis.zeroline is False and fig.layout.xaxis.zeroline is False  # the line along layer 0


def test_own_fonts_fills_the_unsized_labels_and_keeps_the_chosen_ones():
    from normviz.viz.fonts import own_fonts

    fig = vw.signed_bars([1.0, -1.0, 2.0], ["a", "b", "c"], font_size=20)
    chosen = fig.layout.xaxis.tickfont.size  # fitted to the tokens
    own_fonts(fig)
    assert fig.layout.xaxis.tickfont.size == chosen
    assert fig.layout.yaxis.tickfont.size == 20 and fig.layout.yaxis.title.font.size == 20
    assert fig.layout.legend.font.size == 20
    grid = own_fonts(vw.head_grid(np.ones((4, 3)), {}, font_size=20))
    assert grid.data[0].colorbar.tickfont.size == 20 and grid.data[0].colorbar.title.font.size == 20


def test_overview_grid_keeps_its_layer_names_beside_the_squares():
    from normviz import viz

    fig = viz.grid(np.ones((30, 9, 5, 5)), [f"t{k}" for k in range(5)], font_size=18, width_hint=900)
    assert fig.layout.xaxis.constrain == "domain" and fig.layout.yaxis.constrain == "domain"


def test_overview_grids_start_level_and_fit_the_room_given():
    """Seen on stage (1280×800, smollm2): the Norm grid (a two-line colour-bar title, so a narrower area) sat
    ~90 px lower than the weights grid beside it, centred in its area; a 30-layer grid ran 1,400 px tall, past
    the screen. Now each keeps to its area's top left, and ``max_height`` bounds the figure."""
    from normviz import viz

    stack = np.ones((30, 9, 5, 5))
    fig = viz.grid(stack, [f"t{k}" for k in range(5)], font_size=18, width_hint=900, max_height=900)
    assert fig.layout.yaxis.constraintoward == "top" and fig.layout.xaxis.constraintoward == "left"
    assert fig.layout.height == 900
    # the squares then take less than the column: the figure is as wide as they are (colour bar beside them)
    lay = fig.layout
    squares_w = (lay.height - lay.margin.t - lay.margin.b) * (9 * 6 - 1) / (30 * 6 - 1)
    assert squares_w < lay.width < max(520, squares_w + 300) and lay.width < 900
    # rows of 18-px labels never closer than 1.4 × the font: every k-th layer named
    pitch = (lay.height - lay.margin.t - lay.margin.b) / 30 * (30 / len(lay.yaxis.tickvals))
    assert pitch >= 1.4 * 18 - 1e-9 and lay.yaxis.ticktext[0] == "L0"
    assert viz.grid(stack, [f"t{k}" for k in range(5)], font_size=18, width_hint=900).layout.height == 1400
    small = viz.grid(np.ones((6, 12, 5, 5)), [f"t{k}" for k in range(5)], font_size=18, width_hint=900, max_height=2000)
    assert small.layout.height == int((900 - 140) * 6 / 12 + 150)  # a bound above the grid's own height: unchanged


@pytest.mark.parametrize("font_size", [12, 18])
def test_trust_legend_sits_below_the_token_names(font_size):
    from normviz.viz import trust as vt

    fig = vt.truth_beside(
        ["The", " capital", " of"], np.array([1.0, -0.5, 0.2]), {"sources": np.ones(3)}, font_size=font_size
    )
    lay = fig.layout
    assert lay.legend.yref == "container" and lay.legend.y == 0 and lay.legend.yanchor == "bottom"
    assert lay.margin.b >= 30 + 5 * font_size and lay.height - lay.margin.t - lay.margin.b >= 280


@pytest.mark.parametrize("font_size", [12, 18])
def test_overview_grid_top_margin_holds_a_two_line_title_and_the_head_axis(font_size):
    from normviz import viz

    fig = viz.grid(
        np.ones((6, 4, 5, 5)),
        [f"t{k}" for k in range(5)],
        font_size=font_size,
        title="Attention weights α\nminilm: “The cat sat on the mat.”",
    )
    title_lines = 2 * 1.3 * (font_size + 2)
    axis_on_top = 4 * font_size  # tick labels, the theme's stand-off and the "head" title above the squares
    assert fig.layout.margin.t >= 6 + title_lines + axis_on_top + 10, fig.layout.margin.t  # was 70 + 2·font


def test_overview_grids_side_by_side_keep_one_room_for_their_colour_bars():
    """Two grids given one ``bar_room`` (the wider of their colour bars') have the same figure width and right
    margin whatever their units, so the same plot area (on stage at 1280 the Norm grid's "‖vector‖ (hidden-state
    units)" shrank its squares ~20 % against the α grid's); a long unit is wrapped (≤ 12 characters a line)."""
    from normviz import viz

    stack, labels = np.ones((6, 12, 5, 5)), [f"t{k}" for k in range(5)]
    units = ["weight α", "‖vector‖<br>(hidden-state units)"]
    room = viz.grid_bar_room(units, 18)
    figs = [
        viz.grid(stack, labels, font_size=18, width_hint=600, max_height=630, colorbar_title=u, bar_room=room)
        for u in units
    ]
    assert figs[0].layout.margin.r == figs[1].layout.margin.r == room > viz.grid_bar_room(units[:1], 18)
    assert figs[0].layout.width == figs[1].layout.width
    title = figs[1].data[0].colorbar.title.text
    assert title == "‖vector‖<br>(hidden-<br>state units)" and all(len(s) <= 12 for s in title.split("<br>"))
