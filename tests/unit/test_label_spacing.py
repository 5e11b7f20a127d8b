"""No token label overlaps another in any figure at n = 100 (issue 23): measured in each builder's own layout
(plot length from the figure's size and margins, labelled positions from its ticks or texts), for the
heatmap panel, the Overview zoom (a heatmap without a column width), the difference and player panels, the
‖f(x)‖ strip, the focus / Learn bars, the lines view and Translate's alignment, at a page column's width and in
presentation mode."""

from __future__ import annotations

import numpy as np
import pytest

from normviz import viz
from normviz.viz.alignment import alignment_figure
from normviz.viz.labels import CHAR_PER_FONT, MIN_FONT

N = 100
WORDS = ["the", "committee", "met", "on", "a", "cold", "Tuesday", "morning", "to", "discuss", "budgetary"]
LABELS = [f"{WORDS[i % len(WORDS)]}·{i // len(WORDS) + 1}" if i >= len(WORDS) else WORDS[i] for i in range(N)]
M = np.random.default_rng(0).random((N, N))
M /= M.sum(1, keepdims=True)


def _steps(vals: list) -> int:
    """The smallest distance (in positions) between two labelled positions."""
    idx = sorted(int(v) if not isinstance(v, str) else LABEL_POS[v] for v in vals)
    return min((b - a for a, b in zip(idx, idx[1:])), default=N)


LABEL_POS: dict[str, int] = {}


def _category_spacing(fig, axis: str, plot_px: float) -> tuple[float, float]:
    """(px between two neighbouring labels, tick font px) of a token axis with N positions over plot_px."""
    ax = fig.layout[axis]
    vals = list(ax.tickvals)
    cats = None
    if ax.type == "category":  # tickvals are category names: the trace's axis values give their positions
        cats = list(fig.data[0].x if axis.startswith("x") else fig.data[0].y)
        vals = [cats.index(v) for v in vals]
    assert len(vals) >= 5, (axis, len(vals))  # a long text still names tokens along the axis
    return plot_px / N * _steps(vals), float(ax.tickfont.size)


def _check(spacing: float, font: float, what: str) -> None:
    assert font >= MIN_FONT, (what, font)
    assert spacing >= font, (what, spacing, font)  # rotated labels a font size apart do not overlap


@pytest.mark.parametrize("present", [False, True])
@pytest.mark.parametrize("width", [None, 420, 600])
def test_heatmaps_difference_and_player(width, present):
    figs = {
        "heatmap": viz.heatmap(M, LABELS, width=width, present=present, title="t"),
        "difference": viz.difference(M, M.T, LABELS, name_a="a", name_b="b", width=width, present=present),
        "player": viz.layer_player(np.stack([M, M]), LABELS, title="p", width=width, present=present),
    }
    for name, fig in figs.items():
        lay = fig.layout
        w = lay.width
        assert w is not None, name  # sized: to the column, or grown to label every token (the Overview zoom)
        side = w - lay.margin.l - lay.margin.r
        for axis in ("xaxis", "yaxis"):
            spacing, font = _category_spacing(fig, axis, side)
            _check(spacing, font, (name, axis, width, present))


@pytest.mark.parametrize("present", [False, True])
@pytest.mark.parametrize("width", [420, 600, 1200])
def test_the_fx_strip(width, present):
    fig = viz.fx_strip(np.random.default_rng(1).random(N), LABELS, width=width, present=present)
    plot = fig.layout.width - fig.layout.margin.l - fig.layout.margin.r - 60  # minus the y axis' labels
    spacing, font = _category_spacing(fig, "xaxis", plot)
    _check(spacing, font, ("fx_strip", width, present))
    assert fig.layout.width <= max(width, 0) + 1  # within the page column: Streamlit would squeeze it


@pytest.mark.parametrize("present", [False, True])
@pytest.mark.parametrize("width", [None, 420, 1200])
def test_the_fx_strip_keeps_room_for_its_longest_label(width, present):
    """Issue 23: the exported page (no Streamlit theme; plotly caps automargin) cut the strip's labels to their
    last letter and its caption ran into the axis: the bottom margin is the longest label's length."""
    long = [f"{w}{w}" for w in LABELS]  # up to 18 characters
    fig = viz.fx_strip(np.random.default_rng(1).random(N), long, width=width, present=present)
    tick = fig.layout.xaxis.tickfont.size
    longest = max(len(t) for t in fig.layout.xaxis.ticktext)
    assert fig.layout.margin.b >= CHAR_PER_FONT * tick * longest + tick  # turned 90°: its length is its height
    assert fig.layout.height - fig.layout.margin.t - fig.layout.margin.b >= 120  # the bars keep their room
    short = viz.fx_strip(np.ones(3), ["a", "b", "c"], width=width, present=present)
    assert short.layout.margin.b < fig.layout.margin.b  # from the labels, not a constant


@pytest.mark.parametrize("width", [None, 420, 600, 1200])
def test_focus_and_learn_bars(width):
    rows = {"share of the weight α": M[3], "share of the norm": M[4]}
    fig = viz.bars(rows, LABELS, focus_label="the [0]", font_size=12, width=width)
    plot = (width or 560) - fig.layout.margin.l - fig.layout.margin.r - 60
    for axis in ("xaxis", "xaxis2"):
        vals = list(fig.layout[axis].tickvals)
        assert len(vals) >= 10
        _check(plot / N * _steps(vals), float(fig.layout[axis].tickfont.size), ("bars", axis, width))


@pytest.mark.parametrize("present", [False, True])
@pytest.mark.parametrize("height", [None, 420, 600])
def test_the_lines_view(height, present):
    fig = viz.lines(M, LABELS, height=height, width=600, present=present)
    lay = fig.layout
    plot_h = lay.height - lay.margin.t - lay.margin.b
    rows_px = plot_h / (N + 1.9)  # the y range: n rows and the column headers' room
    for side in ("left", "right"):
        tokens = next(t for t in fig.data if (t.meta or {}).get("role") == "tokens" and t.meta["side"] == side)
        shown = [i for i, t in enumerate(tokens.text) if t]
        assert len(shown) >= 10
        _check(rows_px * _steps(shown), float(tokens.textfont.size), ("lines", side, height, present))


@pytest.mark.parametrize("width_px", [None, 800, 1200])
def test_the_translate_alignment(width_px):
    src = [WORDS[i % len(WORDS)] for i in range(N)]
    tgt = [WORDS[(i * 3) % len(WORDS)] for i in range(N - 7)]
    fig = alignment_figure(src, tgt, {(i, i) for i in range(N - 7)}, width_px=width_px, font_size=12)
    per_unit = ((width_px or 1000) - 20) / (max(len(src), len(tgt)) + 0.6)
    for trace in [t for t in fig.data if t.mode == "markers+text"]:
        shown = [(x, t) for x, t in zip(trace.x, trace.text) if t]
        assert len(shown) >= 5
        font = float(trace.textfont.size)
        for (xa, a), (xb, b) in zip(shown, shown[1:]):
            need = CHAR_PER_FONT * font * (len(a) + len(b)) / 2  # half of each centred label
            assert (xb - xa) * per_unit >= need, (a, b, (xb - xa) * per_unit, need)
