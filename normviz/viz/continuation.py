"""A whole continuation explained, drawn (numpy in, plotly out; no model, no torch): the steps × tokens heatmap
of :class:`normviz.attribution.continuation.Continuation` (rows = generated steps, columns = every earlier
token, each cell that token's exact part in the step's logit), and the standalone page ``normviz explain
--continue --html`` writes.

Cells after a step's own position are masked (that step cannot read them); the colour scale is diverging,
centred on 0 and symmetric, one scale for every step; a vertical divider marks where the continuation begins
among the columns; the chosen step's row is outlined."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmap import FOCUS_LINE, heatmap
from .html import standalone_html
from .why import shown

HOVER_CELL = "step %{y}<br>← %{x}: %{z:.4g}<extra></extra>"


def step_labels(tokens: list[str]) -> list[str]:
    """Row labels: each generated token as a visitor reads it (␣ for a leading space …)."""
    return [shown(t) for t in tokens]


def steps_heatmap(
    sources: np.ndarray,
    tokens: list[str],
    columns: list[str],
    *,
    first_generated: int | None = None,
    focus: int | None = None,
    title: str = "",
    font_size: int = 12,
    present: bool = False,
    width: int | None = None,
    colorbar_title: str = "logit part",
) -> go.Figure:
    """[T, N] ``sources`` (NaN where a step cannot read the column) as a heatmap: rows the T steps (labelled
    by their tokens), columns the N tokens. ``first_generated``: the column of the first token that was
    generated (a divider before it); ``focus``: a step whose row is outlined."""
    m = np.asarray(sources, dtype=np.float64)
    finite = np.abs(m[np.isfinite(m)])
    top = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    fig = heatmap(
        m,
        step_labels(tokens),
        [shown(c) for c in columns],
        title=title,
        zmin=-top,
        zmax=top,
        positions=list(range(m.shape[0])),
        col_positions=list(range(m.shape[1])),
        font_size=font_size,
        colorbar_title=colorbar_title,
        masked=~np.isfinite(m),
        present=present,
        width=width,
    )
    fig.update_layout(
        yaxis_title_text="step: the token it generated",
        xaxis_title_text="earlier token",
        yaxis_scaleanchor=None,
        meta={**fig.layout.meta, "normviz": "continuation", "focus": focus},
    )
    fig.data[0].hovertemplate = HOVER_CELL
    T, N = m.shape
    shapes = list(fig.layout.shapes or [])
    if first_generated is not None and 0 < first_generated < N:
        for line in (dict(color="white", width=3), dict(color="black", width=1, dash="dot")):
            shapes.append(
                dict(type="line", x0=first_generated - 0.5, x1=first_generated - 0.5, y0=-0.5, y1=T - 0.5, line=line)
            )
    if focus is not None and 0 <= focus < T:
        shapes.append(
            dict(
                type="rect", x0=-0.5, x1=N - 0.5, y0=focus - 0.5, y1=focus + 0.5, line=dict(color=FOCUS_LINE, width=2.5)
            )
        )
    fig.update_layout(shapes=shapes)
    return fig


def totals_bars(totals: np.ndarray, tokens: list[str], *, title: str = "", font_size: int = 12) -> go.Figure:
    """Each step's total (logit or difference to its foil) as a bar, labelled by its token."""
    labels = [f"{k}: {shown(t)}" for k, t in enumerate(tokens)]
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=np.asarray(totals, dtype=np.float64),
            marker_color="#1f63b4",
            hovertemplate="%{x}: %{y:.4g}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=title),
        font=dict(size=font_size),
        height=320,
        margin=dict(l=10, r=10, t=60, b=10),
        yaxis_title_text="total",
        meta={"normviz": "bars"},
    )
    return fig


def continuation_page(data: dict, prompt: str = "") -> str:
    """The standalone HTML page (opens offline, hover for every value) of a continuation's fields
    (:meth:`Continuation.to_dict`): the text, the steps × tokens heatmap, each step's total."""
    tokens = [str(t) for t in data["tokens"]]
    columns = [str(c) for c in data["columns"]]
    n_src = int(data.get("n_source", 0))
    first = int(data["positions"][0]) + n_src + 1 if len(tokens) > 1 else None
    foil = {"runner-up": " − the runner-up of each step", "token": " − the foil"}.get(data.get("foil_mode"), "")
    heat = steps_heatmap(
        data["sources"],
        tokens,
        columns,
        first_generated=first,
        title=f"Where each generated token came from (logit{foil})",
        width=int(min(1600, max(640, 34 * len(columns) + 260))),
    )
    bars = totals_bars(data["totals"], tokens, title=f"Each step's total (logit{foil}) = its row + its bias")
    text = f"{prompt}‖{data['text']}" if prompt else str(data["text"])
    desc = (
        f"{data['model']} · {data['note']} · {len(tokens)} steps. The text (‖ marks where the continuation "
        f"begins): {text}"
    )
    return standalone_html(
        [heat, bars],
        title="normviz · a continuation explained",
        description=desc,
        captions=[
            "Row t: every earlier token's exact part in step t's logit (grey: after the "
            "step's position). Each row plus its bias is the step's total.",
            "",
        ],
    )


__all__ = ["continuation_page", "step_labels", "steps_heatmap", "totals_bars"]
