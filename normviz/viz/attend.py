"""Figures of why a head attends where it does (:class:`normviz.attribution.qk.Attend`) and of an exact
attribution graph (:class:`normviz.attribution.graph.Graph`): numpy in, plotly out; no model, no torch.
Readable on a projector in light and dark themes: signed colours that stay visible on both backgrounds, labels
escaped (:func:`normviz.viz.why.txt`)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmap import DIVERGING, title_dict
from .labels import plotly_text
from .why import NEG, POS, txt

KIND_COLOURS = {
    "embedding": "#7f8c8d",
    "attention head": "#1f77b4",
    "mlp": "#e67e22",
    "bias": "#95a5a6",
    "logit": "#8e44ad",
}


def _layout(fig: go.Figure, title: str, font_size: int, height: int, **kw) -> go.Figure:
    fig.update_layout(
        title=title_dict(plotly_text(title), font_size),
        font=dict(size=font_size),
        height=int(height),
        margin=dict(l=10, r=10, t=60 + 3 * font_size, b=10),
        **kw,
    )
    return fig


def score_split(
    labels: list[str],
    matrix,
    *,
    title: str = "",
    font_size: int = 14,
    query_label: str = "query side",
    key_label: str = "key side",
) -> go.Figure:
    """A [G, G] split of one score: rows = what wrote the query's state, columns = what wrote the key's, the
    colour scale symmetric around 0 (the parts are signed and sum to the score)."""
    m = np.asarray(matrix, dtype=np.float64)
    lim = float(np.abs(m).max()) or 1.0
    names = [txt(x) for x in labels]
    fig = go.Figure(
        go.Heatmap(
            z=m,
            x=list(range(len(names))),
            y=list(range(len(names))),
            colorscale=DIVERGING,
            zmin=-lim,
            zmax=lim,
            zmid=0,
            customdata=[[f"{names[r]} · {names[c]}" for c in range(len(names))] for r in range(len(names))],
            hovertemplate="%{customdata}: %{z:.4g}<extra></extra>",
            colorbar=dict(title=dict(text="part of the score", side="right")),
        )
    )
    step = max(1, len(names) // 24)
    ticks = list(range(0, len(names), step))
    fig.update_xaxes(
        tickmode="array",
        tickvals=ticks,
        ticktext=[names[k] for k in ticks],
        tickangle=-60,
        title=dict(text=key_label),
        tickfont=dict(size=font_size),
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=ticks,
        ticktext=[names[k] for k in ticks],
        autorange="reversed",
        title=dict(text=query_label),
        tickfont=dict(size=font_size),
    )
    size = 260 + min(len(names), 40) * (font_size + 4)
    return _layout(fig, title, font_size, size, meta=dict(normviz="score_split"))


def top_pairs_bars(pairs: list[tuple[str, str, float]], *, title: str = "", font_size: int = 14) -> go.Figure:
    """The largest parts (query side · key side) as signed horizontal bars, largest on top."""
    labels = [f"{txt(a)} · {txt(b)}" for a, b, _ in pairs]
    v = np.array([w for _, _, w in pairs], dtype=np.float64)
    fig = go.Figure(
        go.Bar(
            x=v,
            y=list(range(len(v))),
            orientation="h",
            marker_color=[POS if x >= 0 else NEG for x in v],
            customdata=labels,
            hovertemplate="%{customdata}: %{x:.4g}<extra></extra>",
        )
    )
    fig.update_yaxes(
        tickmode="array",
        tickvals=list(range(len(v))),
        ticktext=labels,
        autorange="reversed",
        tickfont=dict(size=font_size),
    )
    fig.update_xaxes(title=dict(text="part of the score"), zeroline=True)
    return _layout(fig, title, font_size, 120 + (16 + 1.7 * font_size) * max(1, len(v)), meta=dict(normviz="top_pairs"))


def graph_layout(kinds, layers, heads, positions, n_layers: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of each node: tokens along the bottom at their positions; a layer's heads and its FF one row up
    per layer (heads spread around the position where their effect is largest); the logit at the top."""
    x = np.asarray(positions, dtype=np.float64).copy()
    y = np.full(len(kinds), -2.0)
    for k, kind in enumerate(kinds):
        if kind == "attention head":
            y[k] = 1 + 2 * layers[k]
            x[k] += 0.08 * (heads[k] - 4)
        elif kind == "mlp":
            y[k] = 2 + 2 * layers[k]
        elif kind == "bias":
            x[k] = -1.5
        elif kind == "logit":
            y[k] = 2 * n_layers + 2
    return x, y


def attribution_graph(graph, *, title: str = "", font_size: int = 14, max_edges: int = 400) -> go.Figure:
    """The pruned graph: node size ∝ √|value|, edges coloured by sign (blue +, red −) with width ∝ |weight|; at
    most ``max_edges`` edges drawn, the largest (said in the legend)."""
    keep = np.asarray(graph.node_mask)
    L = int(graph.layers[-1])
    x, y = graph_layout(graph.kinds, graph.layers, graph.heads, graph.positions, L)
    edges = graph.kept_edges()
    shown = edges[:max_edges]
    wmax = max((abs(w) for _, _, w in shown), default=1.0) or 1.0
    fig = go.Figure()
    for sign, colour, name in ((1, POS, "raises the logit"), (-1, NEG, "lowers the logit")):
        for s, t, w in shown:
            if (w >= 0) != (sign > 0):
                continue
            fig.add_trace(
                go.Scatter(
                    x=[x[s], x[t]],
                    y=[y[s], y[t]],
                    mode="lines",
                    hoverinfo="skip",
                    line=dict(color=colour, width=0.5 + 5 * abs(w) / wmax),
                    opacity=0.35 + 0.55 * abs(w) / wmax,
                    showlegend=False,
                    legendgroup=name,
                )
            )
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=colour, width=4), name=name))
    vmax = float(np.abs(graph.values[keep]).max()) or 1.0
    for kind, colour in KIND_COLOURS.items():
        idx = [k for k in np.nonzero(keep)[0] if graph.kinds[k] == kind]
        if not idx:
            continue
        text = [f"{txt(graph.names[k])}: {graph.values[k]:+.3g}" for k in idx]
        fig.add_trace(
            go.Scatter(
                x=x[idx],
                y=y[idx],
                mode="markers",
                name=kind,
                text=text,
                hovertemplate="%{text}<extra></extra>",
                marker=dict(
                    size=[8 + 22 * np.sqrt(abs(graph.values[k]) / vmax) for k in idx],
                    color=colour,
                    line=dict(width=1.5, color="#5b6472"),
                ),
            )
        )
    n = len(graph.tokens)
    step = max(1, n // 30)
    ticks = list(range(0, n, step))
    fig.update_xaxes(
        tickmode="array",
        tickvals=ticks,
        ticktext=[txt(graph.tokens[k]) for k in ticks],
        tickangle=-60,
        tickfont=dict(size=font_size),
        showgrid=False,
        zeroline=False,
    )
    layer_ticks = list(range(0, L, max(1, L // 10)))
    fig.update_yaxes(
        tickmode="array",
        tickvals=[-2] + [1 + 2 * l for l in layer_ticks] + [2 * L + 2],
        ticktext=["tokens"] + [f"layer {l}" for l in layer_ticks] + ["logit"],
        showgrid=False,
        zeroline=False,
        tickfont=dict(size=font_size),
    )
    note = f" (the {len(shown)} largest of {len(edges)} edges)" if len(edges) > len(shown) else ""
    fig.update_layout(
        legend=dict(orientation="v", x=1.01, y=1, font=dict(size=font_size)), plot_bgcolor="rgba(0,0,0,0)"
    )
    return _layout(
        fig,
        (title or "Attribution graph") + note,
        font_size,
        420 + 10 * L + 6 * font_size,
        meta=dict(normviz="attribution_graph"),
    )
