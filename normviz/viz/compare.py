"""Panels that compare or annotate maps: the difference A − B and the ‖f(x_j)‖ strip."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmap import FOCUS_LINE, heatmap, title_dict
from .labels import CHAR_PER_FONT, abbreviate, fit_labels, occurrence_note, plotly_text, with_positions

NORMALISE = {"rows": "rows normalised to sum 1", "raw": "raw values"}


def row_normalise(matrix: np.ndarray) -> np.ndarray:
    """Each row divided by the sum of its absolute values (all-zero rows stay zero)."""
    m = np.asarray(matrix, dtype=np.float64)
    denom = np.abs(m).sum(axis=-1, keepdims=True)
    return np.divide(m, denom, out=np.zeros_like(m), where=denom > 0)


def difference(
    a: np.ndarray,
    b: np.ndarray,
    labels: list[str],
    *,
    name_a: str = "A",
    name_b: str = "B",
    normalise: str = "rows",
    positions: list[int] | None = None,
    causal: bool = False,
    boundary: int | None = None,
    font_size: int = 12,
    present: bool = False,
    width: int | None = None,
    title: str | None = None,
) -> go.Figure:
    """Heatmap of A − B on a diverging scale centred at 0 (symmetric limits ±max|A − B|).

    ``normalise="rows"``: both maps row-normalised (each row / Σ_j |row|) before subtracting, so maps of
    different units compare (weight vs norm: Kobayashi et al. 2020); ``"raw"``: as they are. The title says
    which. Red: A gives the pair more than B; blue: less."""
    if normalise not in NORMALISE:
        raise ValueError(f"normalise must be one of {sorted(NORMALISE)}, got {normalise!r}")
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"maps of different shapes: {a.shape} vs {b.shape}")
    d = row_normalise(a) - row_normalise(b) if normalise == "rows" else a - b
    lim = float(np.abs(d).max()) if d.size else 0.0
    lim = lim if lim > 0 else 1.0
    unit = "share of row" if normalise == "rows" else "raw units"
    return heatmap(
        d,
        labels,
        title=title or f"{name_a} − {name_b} ({NORMALISE[normalise]})",
        zmin=-lim,
        zmax=lim,
        positions=positions,
        causal=causal,
        boundary=boundary,
        font_size=font_size,
        present=present,
        width=width,
        colorbar_title=plotly_text(f"{name_a} − {name_b}") + "<br>" + plotly_text(f"({unit})"),
    )


STRIP_PLOT = 140  # px of the strip's bars


def strip_bottom(chars: int, tick_font: int, vertical: bool) -> int:
    """The strip's bottom margin in px: its longest shown label (``chars`` characters at ``tick_font`` px, about
    0.62 em each, turned 90° or 45°) plus a gap, so that no label is cut (an exported page has no automargin to
    rescue it) and nothing under the figure overlaps the axis."""
    along = CHAR_PER_FONT * tick_font * chars
    return int((along if vertical else along * 0.71 + tick_font) + tick_font + 16)


def fx_strip(
    values: np.ndarray,
    labels: list[str],
    *,
    positions: list[int] | None = None,
    title: str = "‖f(x_j)‖: length of each token's transformed vector",
    font_size: int = 12,
    present: bool = False,
    width: int | None = None,
    height: int | None = None,
    focus: int | None = None,
) -> go.Figure:
    """One bar per token j: ‖f(x_j)‖ (input [n]). Placed under a norm-based map it shows why a column can
    matter little despite large weights: ‖α_ij f(x_j)‖ = α_ij · ‖f(x_j)‖. ``focus``: an original position
    whose bar is drawn in the focus colour."""
    v = np.asarray(values, dtype=np.float64).ravel()
    n = v.size
    positions = list(range(n)) if positions is None else list(positions)
    fit = fit_labels(n, None if width is None else max(120, width - 140), font_size=font_size, present=present)
    base_font = max(font_size, 18) if present else font_size
    names = with_positions(positions, labels)
    notes = ["<br>" + plotly_text(f"{lab} = {note}") if (note := occurrence_note(lab)) else "" for lab in labels]
    colours = [FOCUS_LINE if p == focus else "#6a51a3" for p in positions]
    fig = go.Figure(
        go.Bar(
            x=list(range(n)),
            y=v,
            marker_color=colours,
            showlegend=False,
            customdata=np.stack([names, notes], axis=1) if n else None,
            hovertemplate="%{customdata[0]}: ‖f(x)‖ = %{y:.4g}%{customdata[1]}<extra></extra>",
        )
    )
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(n))[:: fit.step],
        ticktext=[plotly_text(abbreviate(s, fit.max_chars)) for s in labels][:: fit.step],
        tickangle=-90 if n > 12 else -45,
        tickfont=dict(size=fit.tick_font),
        range=[-0.5, n - 0.5],
        showgrid=False,
    )
    fig.update_yaxes(title=dict(text="‖f(x_j)‖", font=dict(size=base_font)), rangemode="tozero")
    shown = [abbreviate(s, fit.max_chars) for s in labels][:: fit.step]
    bottom = strip_bottom(max((len(s) for s in shown), default=1), fit.tick_font, n > 12)
    top = 40 + 2 * base_font
    fig.update_layout(
        title=title_dict(title, base_font),
        font=dict(size=base_font),
        height=int(height or STRIP_PLOT + top + bottom),
        margin=dict(l=10, r=10, t=top, b=bottom),  # b: room for the labels (plotly caps its automargin)
        meta=dict(normviz="fx_strip", label_step=fit.step),
    )
    if width is not None or fit.grown:
        fig.update_layout(width=int(max(width or 0, fit.length + 140)))
    return fig
