"""Focus bars, layers × heads grids, per-head scatter. The single-map heatmap lives in :mod:`.heatmap`."""

from __future__ import annotations

import textwrap

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .heatmap import (
    colorbar_dict,
    heatmap,  # noqa: F401  (its home is heatmap.py; kept importable from here)
)
from .heatmap import colorscale_for as _colorscale
from .heatmap import title_dict as _title
from .labels import abbreviate, fit_labels, plotly_text, plotly_texts

MODEBAR_PX = 30  # plotly's toolbar row at the top right: titles start below it
# each map's bars in one colour that reads on a light and a dark page alike: left to the theme, Streamlit's
# colourway gave the weight α dark blue in light mode and light blue in dark mode, and the norm the other
ROW_COLORS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2", "#72b7b2")


def bars(
    rows: dict[str, np.ndarray],
    labels: list[str],
    positions: list[list[int]] | None = None,
    *,
    focus_label: str = "",
    font_size: int = 12,
    width: int | None = None,
) -> go.Figure:
    """A token's row in every chosen map, one bar chart per map (they have different units). ``width``: the
    px the page gives the chart (labels follow :func:`normviz.viz.labels.fit_labels`; default 560)."""
    import math

    from .labels import CHAR_PER_FONT

    titles = list(rows)
    focus_label = focus_label.strip()  # a BPE token's leading space: “ sat [2]” in the title (smollm2, Learn)
    k = max(1, len(titles))
    step, below = 1, 0.0  # below: the px the longest tick label reaches under its axis
    axes = []
    for r, title in enumerate(titles, start=1):
        vals = np.asarray(rows[title], dtype=np.float64)
        pos = positions[r - 1] if positions else list(range(len(vals)))
        labs = [labels[p] if len(labels) > p else str(p) for p in pos] if positions else labels[: len(vals)]
        fit = fit_labels(len(vals), max(120, int(width or 560) - 80), font_size=font_size)
        ticks = [abbreviate(x, fit.max_chars) for x in labs][:: fit.step]
        angle = 60 if len(vals) <= 12 else 90
        longest = max((len(t) for t in ticks), default=1)
        below = max(
            below,
            CHAR_PER_FONT * fit.tick_font * longest * math.sin(math.radians(angle))
            + fit.tick_font * math.cos(math.radians(angle))
            + 8,
        )
        axes.append((vals, pos, labs, fit, ticks, angle))
        step = max(step, fit.step)
    # rows of a fixed height with, between them, room for the upper row's tick labels and the lower row's title
    # (a fraction of the figure's height left the lower title on the upper labels: issue 42 item 6)
    row_px = 110 + 4 * font_size
    gap_px = below + (font_size + 1) * 1.4 + 14
    area = k * row_px + (k - 1) * gap_px
    fig = make_subplots(
        rows=k, cols=1, subplot_titles=plotly_texts(titles), vertical_spacing=gap_px / area if k > 1 else 0.0
    )
    for r, (title, (vals, pos, labs, fit, ticks, angle)) in enumerate(zip(titles, axes), start=1):
        fig.add_trace(
            go.Bar(
                x=list(range(len(vals))),
                y=vals,
                name=plotly_text(title),
                showlegend=False,
                marker_color=ROW_COLORS[(r - 1) % len(ROW_COLORS)],
                customdata=np.array(
                    [[plotly_text(focus_label), plotly_text(f"{lab} [{p}]")] for lab, p in zip(labs, pos)], dtype=object
                ),
                hovertemplate="%{customdata[0]} ← %{customdata[1]}: %{y:.4g}<extra></extra>",
            ),
            row=r,
            col=1,
        )
        fig.update_xaxes(
            tickmode="array",
            tickvals=list(range(len(vals)))[:: fit.step],
            ticktext=plotly_texts(ticks),
            tickangle=-angle,
            tickfont=dict(size=fit.tick_font),
            row=r,
            col=1,
        )
    fig.update_annotations(font_size=font_size + 1)
    top = 80 + 2 * font_size + MODEBAR_PX
    bottom = int(below) + 10
    fig.update_layout(
        height=int(area + top + bottom),
        font=dict(size=font_size),
        margin=dict(l=10, r=10, t=top, b=bottom),
        title=dict(
            text=plotly_text(f"Row of “{focus_label}”: how much each token contributes to it"),
            font=dict(size=font_size + 2),
            x=0.0,
            xanchor="left",
            yref="container",
            y=1.0,
            yanchor="top",
            pad=dict(t=6 + MODEBAR_PX),
        ),
        meta=dict(normviz="bars", label_step=step),
    )
    if width is not None:
        fig.update_layout(width=int(width))
    return fig


def grid(
    stack: np.ndarray,
    labels: list[str],
    *,
    title: str = "",
    font_size: int = 12,
    head_names: list[str] | None = None,
    width_hint: int = 760,
    colorbar_title: str = "",
    max_height: int | None = None,
    bar_room: int | None = None,
) -> go.Figure:
    """A layers × heads mosaic of small heatmaps ([L, H, n, n]) drawn as one heatmap with gaps, so hundreds
    of heads stay fast. Hover says which layer, head and token pair a cell is. The colour bar spans 80 % of the
    plot's height (so at least that share of the grid's, which the plot holds) with ``colorbar_title`` (the units)
    on top. ``max_height``: the figure's height at most (stage mode: the screen's room, so a 30-layer grid is
    whole on it; its squares shrink); the grid keeps to the top left of its area, so two grids side by side
    start level whatever their colour bars' widths. ``bar_room``: px kept at the right for the colour bar (default
    :func:`_bar_room` of ``colorbar_title``); grids side by side given the same room (the widest of theirs) have
    plot areas of one size, whatever their titles (on stage a Norm grid's two-line unit shrank it ~20 %)."""
    s = np.asarray(stack, dtype=np.float64)
    L, H, n, _ = s.shape
    colorbar_title = "<br>".join(_bar_lines(colorbar_title)) if colorbar_title else ""
    cell = n + 1
    z = np.full((L * cell - 1, H * cell - 1), np.nan)
    custom = np.full(z.shape, "", dtype=object)
    labs = np.array(plotly_texts(labels[:n]), dtype=object)
    pair = np.char.add(np.char.add(labs[:, None].astype(str), " ← "), labs[None, :].astype(str)).astype(object)
    head_names = plotly_texts(head_names or [f"H{h}" for h in range(H)])
    for li in range(L):
        for h in range(H):
            r0, c0 = li * cell, h * cell
            z[r0 : r0 + n, c0 : c0 + n] = s[li, h]
            custom[r0 : r0 + n, c0 : c0 + n] = f"L{li} {head_names[h]}: " + pair
    lo, hi = float(np.nanmin(s)), float(np.nanmax(s))
    scale, zmid = _colorscale(lo)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            customdata=custom,
            hovertemplate="%{customdata}: %{z:.4g}<extra></extra>",
            colorscale=scale,
            zmin=-max(abs(lo), abs(hi)) if lo < 0 else lo,
            zmax=max(abs(lo), abs(hi)) if lo < 0 else hi,
            zmid=zmid,
            hoverongaps=False,
            colorbar={**colorbar_dict(colorbar_title, 400, font_size), "lenmode": "fraction", "len": 0.8},
        )
    )
    # constrain="domain" on x too: a grid narrower than its column (many layers, few heads) shrinks its own area,
    # so the layer names stay beside it (with the range padded instead, they sat ~130 px to its left on stage)
    fig.update_xaxes(
        tickmode="array",
        side="top",
        showgrid=False,
        zeroline=False,
        tickfont=dict(size=font_size),
        constrain="domain",
        constraintoward="left",
        title=dict(text="head", font=dict(size=font_size)),
    )
    fig.update_yaxes(
        tickmode="array",
        autorange="reversed",
        showgrid=False,
        zeroline=False,
        tickfont=dict(size=font_size),
        title=dict(text="layer", font=dict(size=font_size)),
        scaleanchor="x",
        scaleratio=1,
        constrain="domain",
        constraintoward="top",
    )
    room = bar_room if bar_room is not None else _bar_room(colorbar_title, font_size)
    plot_w = max(200, width_hint - 140)  # minus axis labels and the colour bar
    # plotly.js places a title of several lines as if it had one (yanchor "top" holds its first line's
    # baseline): each further line is pushed up past the figure's top edge, so the pad makes room for them
    extra_lines = str(title).count("\n")
    fig.update_layout(
        title=dict(
            text=plotly_text(title),
            font=dict(size=font_size + 2),
            x=0.0,
            xanchor="left",
            yref="container",
            y=1.0,
            yanchor="top",
            pad=dict(t=6 + extra_lines * int(1.3 * (font_size + 2))),
        ),
        height=int(min(max_height or 1400, 1400, max(320, plot_w * L / max(H, 1) + 150))),
        font=dict(size=font_size),
        # the top margin holds the title's lines, then the head names and "head" above the squares
        # (with 70 + 2·font the axis title sat on a two-line title's second line on stage)
        # the right margin holds the colour bar and its title (plotly widens it only for a wider bar)
        margin=dict(l=10, r=room, t=_grid_top(font_size, extra_lines), b=10),
        plot_bgcolor="rgba(0,0,0,0)",
    )
    row_step = col_step = 1
    plot_h = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b
    squares_w = min(plot_w, plot_h * (H * cell - 1) / max(L * cell - 1, 1))
    # the figure as wide as the squares then are (+ layer names, colour bar), never wider than the hint: plotly
    # puts the colour bar at the right of the plot area, so an area wider than the squares (a tall grid: 30
    # layers of 9 heads; a stretched chart; 520 px kept for the title) left it up to ~600 px from them. A title
    # wider than that keeps its room in the right margin, beyond the bar
    need = squares_w + 4 * font_size + 60 + room
    width = int(min(width_hint, max(need, _title_width(title, font_size + 2))))
    fig.update_layout(width=width, margin=dict(r=int(room + max(0.0, width - need))))
    if fig.layout.height < plot_w * L / max(H, 1) + 150:
        # the height bound holds the squares: squares smaller than a label: every k-th layer / head named (the
        # others still say theirs on hover)
        row_step = max(1, int(np.ceil(1.4 * font_size * L / max(plot_h, 1))))
        col_step = max(1, int(np.ceil(1.4 * font_size * H / max(squares_w, 1))))
        fig.update_xaxes(tickangle=0)
    fig.update_yaxes(
        tickvals=[li * cell + (n - 1) / 2 for li in range(0, L, row_step)],
        ticktext=[f"L{li}" for li in range(0, L, row_step)],
    )
    fig.update_xaxes(tickvals=[h * cell + (n - 1) / 2 for h in range(0, H, col_step)], ticktext=head_names[::col_step])
    return fig


def grid_bar_room(colorbar_titles, font_size: int) -> int:
    """px the widest of these grids' colour bars takes (``bar_room`` of :func:`grid` for grids side by side)."""
    return max((_bar_room(t, font_size) for t in colorbar_titles), default=_bar_room("", font_size))


def _bar_room(colorbar_title: str, font_size: int) -> int:
    """px a grid's colour bar takes at its right: the gap, the bar, its ticks and its title's longest line
    (Source Sans: ~0.5 em a character)."""
    longest = max((len(line) for line in _bar_lines(colorbar_title)), default=0)
    return int(30 + max(3 * font_size, 0.5 * font_size * longest))


def _bar_lines(colorbar_title: str, width: int = 12) -> list[str]:
    """A grid's colour-bar title in lines of at most ``width`` characters where its words allow (a long unit
    would otherwise take the room of the squares)."""
    return [w for line in str(colorbar_title).split("<br>") for w in (textwrap.wrap(line, width) or [""])]


def _title_width(title: str, font_size: int) -> int:
    """px a title's longest line takes (Source Sans: ~0.55 em a character) + the gap at its left."""
    return int(10 + 0.55 * font_size * max((len(line) for line in str(title).split("\n")), default=0))


def _grid_top(font_size: int, extra_lines: int) -> int:
    """The grid's top margin: pad + the title's lines (1.3 × its font each) + the x axis on top (ticks, the chart
    theme's stand-off, the title: ~4.5 × the font; 2.8 × left "head" touching a two-line title on stage) + a gap."""
    title_line = int(1.3 * (font_size + 2))
    return int(6 + (1 + extra_lines) * title_line + 4.5 * font_size + 24)


def special_share_scatter(
    share_a: np.ndarray, share_b: np.ndarray, name_a: str, name_b: str, *, font_size: int = 12
) -> go.Figure:
    """One point per head: share of map A vs share of map B that goes to special tokens. Heads far below the
    diagonal put their weight on [CLS]/[SEP]/BOS but move little there: candidates for "no-op" heads."""
    a = np.asarray(share_a, dtype=np.float64)
    b = np.asarray(share_b, dtype=np.float64)
    L, H = a.shape
    name_a, name_b = plotly_text(name_a), plotly_text(name_b)
    names = [f"L{li} H{h}" for li in range(L) for h in range(H)]
    layer = np.repeat(np.arange(L), H)
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[0, 1], y=[0, 1], mode="lines", line=dict(dash="dot", color="gray"), hoverinfo="skip", showlegend=False
        )
    )
    fig.add_trace(
        go.Scatter(
            x=a.ravel(),
            y=b.ravel(),
            mode="markers",
            text=names,
            showlegend=False,
            marker=dict(
                size=max(8, font_size - 2),
                color=layer,
                colorscale="Plasma",
                colorbar=dict(title=dict(text="layer"), thickness=14),
            ),
            hovertemplate="%{text}<br>" + name_a + ": %{x:.2f}<br>" + name_b + ": %{y:.2f}<extra></extra>",
        )
    )
    fig.update_xaxes(
        range=[-0.02, 1.02], title=dict(text=f"share to special tokens: {name_a}"), tickfont=dict(size=font_size)
    )
    fig.update_yaxes(
        range=[-0.02, 1.02], title=dict(text=f"share to special tokens: {name_b}"), tickfont=dict(size=font_size)
    )
    fig.update_layout(
        height=480,
        font=dict(size=font_size),
        margin=dict(l=10, r=10, t=60 + font_size, b=10),
        title=_title("Per head: where the weight goes vs where the vectors go", font_size),
    )
    return fig
