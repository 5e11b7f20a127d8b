"""The lines view (as in bertviz's head view): contributing tokens j on the left, receiving tokens i on the
right, one link j → i per pair whose width and opacity grow with |map[i, j]| / max |map|.

Links are drawn in ``bins`` traces of equal strength (one trace per strength and sign, not one per link), so
a 128-token map stays light. ``threshold`` hides links below that fraction of the largest |value|.
``focus`` (an original token position) draws only that token's links, highlighted — the Streamlit way to
isolate a token. In the standalone HTML (:mod:`normviz.viz.html`) hovering a token does the same live,
from the link list kept in ``layout.meta["links"]``.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmap import FOCUS_LINE as FOCUS
from .heatmap import divider_index, title_dict
from .labels import abbreviate, fit_labels, plotly_text, sizing, with_positions

POSITIVE = "#1f63b4"
NEGATIVE = "#c0392b"
LEFT_X, RIGHT_X = 0.0, 1.0


def link_levels(matrix: np.ndarray, threshold: float = 0.0, bins: int = 6) -> np.ndarray:
    """[k, 4] rows (i, j, level 1…bins, sign ±1) of the links drawn: |m_ij| / max|m| ≥ threshold and > 0."""
    m = np.nan_to_num(np.asarray(matrix, dtype=np.float64))
    top = float(np.abs(m).max()) if m.size else 0.0
    if top <= 0:
        return np.zeros((0, 4), dtype=int)
    rel = np.abs(m) / top
    i, j = np.nonzero((rel >= threshold) & (rel > 0))
    level = np.clip(np.ceil(rel[i, j] * bins), 1, bins).astype(int)
    return np.stack([i, j, level, np.where(m[i, j] < 0, -1, 1)], axis=1).astype(int)


def _segments(links: np.ndarray, level: int, sign: int) -> tuple[np.ndarray, np.ndarray]:
    """x, y of the links of one strength and sign: [left, right, NaN] per link (NaN breaks the line)."""
    sel = links[(links[:, 2] == level) & (links[:, 3] == sign)]
    k = len(sel)
    x = np.tile([LEFT_X, RIGHT_X, np.nan], k)
    y = np.column_stack([sel[:, 1], sel[:, 0], np.full(k, np.nan)]).ravel() if k else np.zeros(0)
    return x, y


def _style(level: int, bins: int) -> tuple[float, float]:
    """(width px, opacity) of a link of strength ``level``."""
    return 0.6 + 4.4 * level / bins, 0.12 + 0.83 * level / bins


def _top_text(m: np.ndarray, names: list[str], axis: int, k: int = 3) -> list[str]:
    """Per token, its k largest links: receivers (axis=1, a row) or contributors (axis=0, a column)."""
    out = []
    for t in range(m.shape[0] if axis == 1 else m.shape[1]):
        vec = m[t] if axis == 1 else m[:, t]
        order = np.argsort(-np.abs(vec))[:k]
        out.append(", ".join(f"{names[o]} {vec[o]:.3g}" for o in order if vec[o] != 0) or "none")
    return out


def lines(
    matrix: np.ndarray,
    labels: list[str],
    *,
    positions: list[int] | None = None,
    threshold: float = 0.0,
    focus: int | None = None,
    title: str = "",
    font_size: int = 12,
    present: bool = False,
    height: int | None = None,
    width: int | None = None,
    boundary: int | None = None,
    bins: int = 6,
) -> go.Figure:
    """A square map [n, n] as links between two token columns (left: contributing j, right: receiving i).

    ``positions``: original positions of the shown tokens; ``focus``: an original position whose links alone
    are drawn (highlighted); ``threshold``: hide links below this fraction of max |value| (0…1);
    ``boundary``: original position of a pair's second segment (a dashed divider across both columns);
    ``width``: the figure's width in px (default 600, presentation 900), so the columns stay close."""
    m = np.nan_to_num(np.asarray(matrix, dtype=np.float64))
    n = m.shape[0]
    positions = list(range(n)) if positions is None else list(positions)
    size = sizing(n, font_size=font_size, present=present)  # for the label length only
    tick = max(font_size, 18) if present else font_size  # the figure grows with n, so labels keep their size
    links = link_levels(m, threshold, bins)
    names = with_positions(positions, labels)
    fidx = positions.index(focus) if focus is not None and focus in positions else None
    if fidx is not None:
        links = links[(links[:, 0] == fidx) | (links[:, 1] == fidx)]

    traces = []
    for sign, colour in ((1, POSITIVE), (-1, NEGATIVE)):
        for level in range(1, bins + 1):
            xs, ys = _segments(links, level, sign)
            w, op = _style(level, bins)
            traces.append(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="lines",
                    hoverinfo="skip",
                    showlegend=False,
                    opacity=1.0 if fidx is not None else op,
                    line=dict(width=w, color=FOCUS if fidx is not None else colour),
                    meta=dict(role="links", level=level, sign=sign),
                )
            )
    for level in range(1, bins + 1):  # empty until a token is hovered in the standalone HTML
        traces.append(
            go.Scatter(
                x=[],
                y=[],
                mode="lines",
                hoverinfo="skip",
                showlegend=False,
                line=dict(width=_style(level, bins)[0] + 1, color=FOCUS),
                meta=dict(role="highlight", level=level),
            )
        )
    base_font = max(font_size, 18) if present else font_size
    row_px = tick * 1.45
    top = 50 + 2 * base_font
    fig_h = int(height or max(300, n * row_px + 90 + 2 * base_font))
    # a given height that cannot hold every row at this font labels every step-th token (the one rule of
    # normviz.viz.labels.fit_labels: a label needs a cell of 1.25 × its font); the hover still names each
    rows_px = max(1.0, (fig_h - top - 10) * n / (n + 1.9))  # the y range is n + 1.9 rows (the headers' room)
    fit = fit_labels(n, int(rows_px), font_size=font_size, present=present) if height else None
    step = fit.step if fit is not None else 1
    if fit is not None and fit.step > 1:
        tick = fit.tick_font
    short = [
        plotly_text(abbreviate(x, size.max_chars)) if t % step == 0 or t == fidx else "" for t, x in enumerate(labels)
    ]
    bold = [f"<b>{x}</b>" if t == fidx else x for t, x in enumerate(short)]
    common = dict(
        mode="markers+text",
        showlegend=False,
        y=list(range(n)),
        text=bold,
        textfont=dict(size=tick),
        marker=dict(size=max(6, tick // 2), color="#888"),
    )
    traces.append(
        go.Scatter(
            x=[LEFT_X] * n,
            textposition="middle left",
            customdata=np.stack([names, _top_text(m, names, axis=0)], axis=1) if n else None,
            meta=dict(role="tokens", side="left"),
            hovertemplate="%{customdata[0]} contributes most to: %{customdata[1]}<extra></extra>",
            **common,
        )
    )
    traces.append(
        go.Scatter(
            x=[RIGHT_X] * n,
            textposition="middle right",
            customdata=np.stack([names, _top_text(m, names, axis=1)], axis=1) if n else None,
            meta=dict(role="tokens", side="right"),
            hovertemplate="%{customdata[0]} receives most from: %{customdata[1]}<extra></extra>",
            **common,
        )
    )
    k = divider_index(positions, boundary)
    shapes = (
        []
        if k is None
        else [
            dict(type="line", x0=x0, x1=x1, y0=k - 0.5, y1=k - 0.5, line=dict(color="gray", dash="dash"))
            for x0, x1 in ((LEFT_X - 0.45, LEFT_X + 0.05), (RIGHT_X - 0.05, RIGHT_X + 0.45))
        ]
    )
    headers = [
        dict(x=x, y=-1.2, text=text, showarrow=False, font=dict(size=base_font), yanchor="bottom")
        for x, text in ((LEFT_X, "contributing (j)"), (RIGHT_X, "receiving (i)"))
    ]
    layout = dict(
        title=title_dict(title, base_font),
        font=dict(size=base_font),
        hovermode="closest",
        xaxis=dict(visible=False, range=[-0.7, 1.7], fixedrange=True),
        yaxis=dict(visible=False, range=[n - 0.5, -2.4], fixedrange=False),  # room for the column headers
        shapes=shapes,
        annotations=headers,
        height=fig_h,
        width=int(width or (900 if present else 600)),
        margin=dict(l=10, r=10, t=top, b=10),
        plot_bgcolor="rgba(0,0,0,0)",
        meta=dict(
            normviz="lines",
            bins=bins,
            n=n,
            links=links.tolist(),
            focus=fidx,
            label_step=step,
            matrix=np.where(np.isfinite(m), m, 0.0).tolist(),
        ),
    )
    fig = go.Figure(data=traces, layout=layout)  # built once: plotly's per-call updates are slow
    return fig
