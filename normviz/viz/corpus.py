"""Plotly figures of corpus statistics (no Streamlit import): they take the tables of
:mod:`normviz.corpus.results` and return ``go.Figure`` objects.

Colours follow the app: one qualitative colour per map, the same across figures; Viridis for heatmaps
(RdBu around 0 when the statistic is signed).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..core.errors import NormvizError
from ..corpus.results import PAPER_REFERENCE
from ..corpus.stats import CATEGORIES
from ..methods import keyspace
from .labels import plotly_text

WEIGHT_COLOR = "#9aa5b8"
NORM_COLOR = "#2a6fdb"
MAP_COLORS = {
    "attention": "#9aa5b8",
    "norm": "#2a6fdb",
    "norm_layer": "#2a6fdb",
    "attn_res": "#e8871e",
    "attn_res_ln": "#c4302b",
    "ff": "#2e9e5b",
    "ff_res": "#7b4fc9",
    "ff_res_ln": "#1a1d24",
}
COLUMN_TITLES = {
    "fx_cv": "CV of ‖f(x)‖ (per sentence)",
    "fx_cv_pooled": "CV of ‖f(x)‖ (whole corpus)",
    "fx_norm_mean": "mean ‖f(x)‖",
    "rho_alpha_fx": "Spearman ρ(α, ‖f(x)‖)",
    "rho_fx_freq": "Spearman ρ(‖f(x)‖, frequency rank)",
    "mixing_attention": "mixing ratio, weights",
    "mixing_norm": "mixing ratio, norms ‖αf(x)‖",
    "mixing_share_norm": "share of non-self norms, ‖αf(x)‖",
}


def _map_title(key: str) -> str:
    try:
        return keyspace.key_info(key).title
    except NormvizError:
        return key


def column_title(col: str) -> str:
    if col in COLUMN_TITLES:
        return COLUMN_TITLES[col]
    for prefix, what in (
        ("mixing_share_", "share of non-self norms, "),
        ("mixing_", "mixing ratio, "),
        ("ff_change_", "FF change, attn_res_ln → "),
    ):
        if col.startswith(prefix):
            key = col[len(prefix) :]
            return what + (key if prefix == "ff_change_" else _map_title(key))
    return col


def _layout(fig: go.Figure, title: str, height: int = 380, font_size: int = 12) -> go.Figure:
    fig.update_layout(
        title=dict(text=plotly_text(title), x=0.0, xanchor="left", font=dict(size=font_size + 2)),
        height=int(height * max(1.0, font_size / 12)),
        font=dict(size=font_size),
        margin=dict(l=10, r=10, t=60 + font_size, b=10),
        legend=dict(orientation="h", y=-0.2),
    )
    return fig


def category_shares(shares: pd.DataFrame, layers=None, heads=None, font_size: int = 12) -> go.Figure:
    """Bars by token category: share of attention weight (left) vs share of norm ‖αf(x)‖ (right), averaged
    over the chosen layers and heads (all by default). A dashed tick marks each category's share of tokens."""
    df = shares
    if layers is not None:
        df = df[df["layer"].isin(list(layers))]
    if heads is not None:
        df = df[df["head"].isin(list(heads))]
    mean = df.groupby("category", sort=False)[["weight_share", "norm_share", "token_share"]].mean()
    mean = mean.reindex([c for c in CATEGORIES if c in mean.index])
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=("attention weight α", "norm ‖αf(x)‖"))
    for col, (name, color) in enumerate((("weight_share", WEIGHT_COLOR), ("norm_share", NORM_COLOR)), start=1):
        fig.add_trace(
            go.Bar(
                x=list(mean.index),
                y=mean[name],
                marker_color=color,
                name=name.replace("_", " "),
                hovertemplate="%{x}: %{y:.3f}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.add_trace(
            go.Scatter(
                x=list(mean.index),
                y=mean["token_share"],
                mode="markers",
                marker=dict(symbol="line-ew-open", size=28, color="#1a1d24"),
                name="share of tokens",
                showlegend=col == 1,
                hovertemplate="%{x}: %{y:.3f} of tokens<extra></extra>",
            ),
            row=1,
            col=col,
        )
    fig.update_yaxes(title_text="mean share received", row=1, col=1)
    where = "all layers and heads" if layers is None and heads is None else "selected layers/heads"
    return _layout(fig, f"What each token category receives ({where})", font_size=font_size)


def category_by_layer(shares: pd.DataFrame, category: str, font_size: int = 12) -> go.Figure:
    """Per-layer share (mean over heads) of one category under weights and under norms."""
    df = shares[shares["category"] == category].groupby("layer")[["weight_share", "norm_share", "token_share"]].mean()
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=df.index, y=df["weight_share"], name="weight α", line=dict(color=WEIGHT_COLOR, width=3)))
    fig.add_trace(go.Scatter(x=df.index, y=df["norm_share"], name="norm ‖αf(x)‖", line=dict(color=NORM_COLOR, width=3)))
    fig.add_trace(
        go.Scatter(x=df.index, y=df["token_share"], name="share of tokens", line=dict(color="#1a1d24", dash="dot"))
    )
    fig.update_xaxes(title_text="layer", dtick=1 if len(df) <= 16 else None)
    fig.update_yaxes(title_text="mean share received")
    return _layout(fig, f"Share received by '{category}' tokens, per layer", font_size=font_size)


REF_FONT = 11  # px of a reference line's label


def layer_lines(
    layer_stats: pd.DataFrame, columns: list[str], title: str = "", reference: bool = True, font_size: int = 12
) -> go.Figure:
    """One line per statistic across layers; dashed lines mark the papers' BERT-base means where known. Their
    labels sit in the right margin beside each line's end (no curve runs there), nudged apart when two
    references are close, so no curve overprints them."""
    fig = go.Figure()
    refs = []  # (value, colour, label)
    for col in columns:
        if col not in layer_stats:
            continue
        key = col.removeprefix("mixing_share_").removeprefix("mixing_") if col.startswith("mixing_") else col
        color = MAP_COLORS.get(key) if col.startswith("mixing_") else None
        fig.add_trace(
            go.Scatter(
                x=layer_stats["layer"],
                y=layer_stats[col],
                mode="lines+markers",
                name=column_title(col),
                line=dict(color=color, width=3),
            )
        )
        ref = PAPER_REFERENCE.get(col)
        if reference and ref:
            fig.add_hline(y=ref["value"], line=dict(color=color or "#1a1d24", dash="dash", width=1))
            refs.append((float(ref["value"]), color or "#1a1d24", f"BERT-base {ref['value']:g}"))
    fig.update_xaxes(title_text="layer", dtick=1 if len(layer_stats) <= 16 else None)
    fig = _layout(fig, title or ", ".join(column_title(c) for c in columns), font_size=font_size)
    if refs:
        values = [v for c in columns if c in layer_stats for v in np.asarray(layer_stats[c], np.float64).ravel()]
        values = [v for v in values + [r[0] for r in refs] if np.isfinite(v)]
        lo, hi = min(values), max(values)
        pad = 0.05 * (hi - lo or 1.0)
        lo, hi = lo - pad, hi + pad
        fig.update_yaxes(range=[lo, hi])  # fixed, so that label offsets in px are known
        plot_px = fig.layout.height - fig.layout.margin.t - fig.layout.margin.b - 60  # minus the x axis, legend
        for (value, color, text), shift in zip(
            sorted(refs), label_shifts([r[0] for r in sorted(refs)], lo, hi, plot_px, REF_FONT + 4)
        ):
            fig.add_annotation(
                text=plotly_text(text),
                xref="paper",
                x=1.0,
                xanchor="left",
                xshift=4,
                yref="y",
                y=value,
                yshift=shift,
                yanchor="middle",
                showarrow=False,
                font=dict(size=REF_FONT, color=color),
                name="reference",
            )
        longest = max(len(r[2]) for r in refs)
        fig.update_layout(margin=dict(r=int(0.62 * REF_FONT * longest) + 16))
    return fig


def label_shifts(values: list[float], lo: float, hi: float, plot_px: float, gap_px: float) -> list[float]:
    """Vertical px shifts for labels at ``values`` (ascending) on an axis [lo, hi] drawn ``plot_px`` tall, so that
    neighbouring labels are at least ``gap_px`` apart (each pushed up from the one below when too close)."""
    scale = plot_px / (hi - lo) if hi > lo else 0.0
    out, last = [], None
    for v in values:
        px = (v - lo) * scale
        placed = px if last is None else max(px, last + gap_px)
        out.append(placed - px)
        last = placed
    return out


def head_heatmap(head_stats: pd.DataFrame, column: str, font_size: int = 12) -> go.Figure:
    """Head × layer heatmap of one per-head statistic."""
    piv = head_stats.pivot(index="head", columns="layer", values=column)
    z = piv.to_numpy(dtype=np.float64)
    signed = np.nanmin(z) < 0 if np.isfinite(z).any() else False
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(piv.columns),
            y=list(piv.index),
            colorscale="RdBu_r" if signed else "Viridis",
            zmid=0.0 if signed else None,
            colorbar=dict(thickness=14),
            hovertemplate="layer %{x}, head %{y}: %{z:.4f}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text="layer", dtick=1 if z.shape[1] <= 16 else None)
    fig.update_yaxes(title_text="head", autorange="reversed", dtick=1)
    return _layout(fig, f"{column_title(column)} per head", height=max(320, 80 + 24 * z.shape[0]), font_size=font_size)


def head_columns(head_stats: pd.DataFrame) -> list[str]:
    return [c for c in head_stats.columns if c not in ("layer", "head")]
