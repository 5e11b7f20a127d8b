"""One map as a heatmap: rows = receiving token i, columns = contributing token j.

Readable at any n (sizes from :func:`normviz.viz.labels.sizing`), square cells, a colour bar of fixed
height, causal (j > i) cells masked (NaN in the map, drawn by a flat grey layer that names them in the
hover), an optional divider between the two segments of a sentence pair, and repeated-token suffixes
('the·2') explained in the hover. The axes are categories named 'token [position]', so the hover needs no
per-cell strings (a 128-token panel stays small and quick to send).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .labels import Sizing, abbreviate, fit_labels, occurrence_note, plotly_text, sizing

SEQUENTIAL = "Viridis"
DIVERGING = "RdBu_r"
MASKED_BG = "rgba(128, 128, 128, 0.35)"  # masked (NaN) cells: mid grey over the page, light or dark (no glare)
FOCUS_LINE = "#ff7f0e"  # the focus token's row and column
MASKED_TEXT = "masked (causal): a decoder's token i cannot see a later token j"
HOVER = "%{y} ← %{x}: %{z:.4g}<extra></extra>"


def title_dict(text: str, font_size: int) -> dict:
    """A title just above the plot area, below plotly's toolbar (which takes the top-right); ``text`` is
    shown as typed (:func:`~normviz.viz.labels.plotly_text`)."""
    return dict(
        text=plotly_text(text),
        font=dict(size=font_size + 2),
        x=0.0,
        xanchor="left",
        yref="paper",
        y=1.0,
        yanchor="bottom",
        pad=dict(b=8),
    )


def colorscale_for(zmin: float) -> tuple[str, float | None]:
    """Diverging and centred on 0 when values go below 0, else sequential."""
    return (DIVERGING, 0.0) if zmin < 0 else (SEQUENTIAL, None)


def colorbar_dict(title: str, side: int, font_size: int) -> dict:
    """A colour bar of fixed, modest height (≤ 260 px), its title (the units) on top."""
    return dict(
        title=dict(text=title, side="top", font=dict(size=font_size)),
        thickness=14,
        lenmode="pixels",
        len=int(min(260, max(120, 0.6 * side))),
        y=1.0,
        yanchor="top",
        tickfont=dict(size=font_size),
    )


def causal_mask(row_positions, col_positions) -> np.ndarray:
    """True where the contributing token comes after the receiving one (j > i in original positions)."""
    return np.asarray(col_positions)[None, :] > np.asarray(row_positions)[:, None]


def divider_index(positions, boundary: int | None) -> int | None:
    """Shown index of the first token of the second segment (original position ``boundary``), or None."""
    if boundary is None:
        return None
    k = next((i for i, p in enumerate(positions) if p >= boundary), None)
    return k if k is not None and 0 < k < len(positions) else None


def hover_names(positions, labels) -> list[str]:
    """Category names of the axes, read by the hover: 'cat [2]', 'the·2 [5] (the 2nd occurrence of 'the')'.
    Unique (positions are), so a repeated token keeps its own row and column. Escaped for plotly
    (:func:`~normviz.viz.labels.plotly_text`): a token ``<b>`` shows as typed."""
    return [
        plotly_text(f"{lab} [{pos}]" + (f" ({note})" if (note := occurrence_note(lab)) else ""))
        for pos, lab in zip(positions, labels)
    ]


def heatmap(
    matrix: np.ndarray,
    row_labels: list[str],
    col_labels: list[str] | None = None,
    *,
    title: str = "",
    zmin: float | None = None,
    zmax: float | None = None,
    positions: list[int] | None = None,
    font_size: int = 12,
    colorbar: bool = True,
    colorbar_title: str = "",
    height: int | None = None,
    causal: bool = False,
    masked: np.ndarray | None = None,
    boundary: int | None = None,
    present: bool = False,
    width: int | None = None,
    col_positions: list[int] | None = None,
    threshold: float = 0.0,
    focus: int | None = None,
) -> go.Figure:
    """One [n_rows, n_cols] map as a heatmap with numeric axes (a repeated token keeps its own row/column).

    ``positions`` / ``col_positions``: original token positions of the shown rows / columns (hover names
    'label [position]'). ``causal``: mask cells whose column comes after their row (decoders); ``masked``:
    an explicit boolean mask instead. ``boundary``: original position of the second segment's first token
    (sentence pairs) — a divider is drawn before it. ``width``: the pixel width the page gives the panel
    (None: the chart stretches to its container); ``layout.width`` is then set, and it grows beyond
    ``width`` when n labels need more room (show the chart at its own width, with a scroll bar).
    ``present``: labels ≥ 18 px. ``height`` overrides the computed height (older callers).
    ``threshold``: cells with |value| below this fraction of the largest |value| are drawn as 0 (the hover
    keeps the value and says it is hidden). ``focus``: an original position whose row and column are
    outlined (the token picked in every panel)."""
    m = np.array(matrix, dtype=np.float64)
    n_rows, n_cols = m.shape
    col_labels = row_labels if col_labels is None else col_labels
    positions = list(range(n_rows)) if positions is None else list(positions)
    if col_positions is None:
        col_positions = positions if n_cols == n_rows else list(range(n_cols))
    base_font = max(font_size, 18) if present else font_size
    longest = max((len(x) for x in list(row_labels) + list(col_labels)), default=1)
    right = 120 if colorbar else 20

    def label_px(tick: int, max_chars: int) -> int:  # room for the tick labels and the axis title
        return int(0.62 * tick * min(max_chars + 2, longest)) + base_font + 30

    side_hint = None
    if width is not None:  # the panel's whole width: the plot side is what the labels and colour bar leave
        first = sizing(max(n_rows, n_cols), width=width, font_size=font_size, present=present)
        side_hint = max(120, int(width) - label_px(first.tick_font, first.max_chars) - right)
    fit = fit_labels(max(n_rows, n_cols), side_hint, font_size=font_size, present=present)  # every step-th labelled
    size, step = Sizing(fit.length, fit.tick_font, fit.max_chars, fit.grown), fit.step
    if masked is None and causal and n_rows == n_cols:
        masked = causal_mask(positions, col_positions)
    mask = np.zeros(m.shape, bool) if masked is None else np.asarray(masked, bool)

    rows = hover_names(positions, row_labels)
    cols = hover_names(col_positions, col_labels)
    m[mask] = np.nan
    hover, custom = HOVER, None
    if threshold > 0 and np.isfinite(m).any():
        small = (np.abs(np.nan_to_num(m)) < threshold * np.nanmax(np.abs(m))) & ~mask
        custom = m.copy()  # the true values, for the hover (numbers travel compactly, strings would not)
        m[small] = 0.0
        hover = (
            "%{y} ← %{x}: %{customdata:.4g}" + f"<br>(cells below {threshold:g} × the largest are drawn as 0)"
            "<extra></extra>"
        )

    finite = m[np.isfinite(m)]
    zmin = (float(finite.min()) if finite.size else 0.0) if zmin is None else zmin
    zmax = (float(finite.max()) if finite.size else 1.0) if zmax is None else zmax
    scale, zmid = colorscale_for(zmin)
    traces = [
        go.Heatmap(
            z=m,
            x=cols,
            y=rows,
            zmin=zmin,
            zmax=zmax,
            zmid=zmid,
            colorscale=scale,
            customdata=custom,
            hovertemplate=hover,
            hoverongaps=False,
            showscale=colorbar,
            colorbar=colorbar_dict(colorbar_title, size.side, base_font),
        )
    ]
    if mask.any():  # masked cells: a flat grey layer of their own, which says so in the hover
        traces.append(
            go.Heatmap(
                z=np.where(mask, 1.0, np.nan),
                x=cols,
                y=rows,
                showscale=False,
                hoverongaps=False,
                colorscale=[[0, MASKED_BG], [1, MASKED_BG]],
                meta=dict(role="masked"),
                hovertemplate="%{y} ← %{x}: " + MASKED_TEXT + "<extra></extra>",
            )
        )
    tick = size.tick_font
    angle = -90 if max(n_rows, n_cols) > 12 else -45
    axis = dict(
        tickmode="array", type="category", tickfont=dict(size=tick), showgrid=False, zeroline=False, constrain="domain"
    )
    xaxis = dict(
        axis,
        tickvals=cols[::step],
        ticktext=[plotly_text(abbreviate(x, size.max_chars)) for x in col_labels][::step],
        tickangle=angle,
        title=dict(text="contributing token (j)", font=dict(size=base_font)),
        side="bottom",
    )
    yaxis = dict(
        axis,
        tickvals=rows[::step],
        ticktext=[plotly_text(abbreviate(x, size.max_chars)) for x in row_labels][::step],
        autorange="reversed",
        title=dict(text="receiving token (i)", font=dict(size=base_font)),
        scaleanchor="x",
        scaleratio=1,
    )
    top = 50 + 2 * base_font
    left = bottom = label_px(tick, size.max_chars)
    shapes = []
    k = divider_index(positions, boundary) if n_rows == n_cols else None
    if k is not None:
        for line in (dict(color="white", width=3), dict(color="black", width=1, dash="dot")):
            shapes.append(dict(type="line", x0=k - 0.5, x1=k - 0.5, y0=-0.5, y1=n_rows - 0.5, line=line))
            shapes.append(dict(type="line", x0=-0.5, x1=n_cols - 0.5, y0=k - 0.5, y1=k - 0.5, line=line))
    r = positions.index(focus) if focus is not None and focus in positions else None
    c = col_positions.index(focus) if focus is not None and focus in col_positions else None
    outline = dict(color=FOCUS_LINE, width=2.5)
    if r is not None:
        shapes.append(dict(type="rect", x0=-0.5, x1=n_cols - 0.5, y0=r - 0.5, y1=r + 0.5, line=outline))
    if c is not None:
        shapes.append(dict(type="rect", x0=c - 0.5, x1=c + 0.5, y0=-0.5, y1=n_rows - 0.5, line=outline))
    layout = dict(
        title=title_dict(title, base_font),
        font=dict(size=base_font),
        plot_bgcolor=MASKED_BG,
        xaxis=xaxis,
        yaxis=yaxis,
        shapes=shapes,
        height=int(height or (size.side + top + bottom)),
        margin=dict(l=left, r=right, t=top, b=bottom),  # plotly widens them if the labels need more
        meta=dict(normviz="heatmap", divider=k, masked=int(mask.sum()), focus=r, label_step=step),
    )
    if width is not None or size.grown:
        layout["width"] = int(max(width or 0, size.side + left + right))
    fig = go.Figure(data=traces, layout=layout)  # one construction: plotly's update calls cost ~0.3 s a panel
    return fig
