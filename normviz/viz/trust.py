"""Figures of the faithfulness scores (arrays and labels in, plotly figures out; no model, no torch)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

# the bars of one text: a colour per trace, fixed (the theme's colour cycle differs between light and dark, so the
# legend's colours swapped with the theme); each reads on a white and on a dark page
BESIDE = ("#8a8f98", "#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2", "#72b7b2", "#eeca3b")
WHISKER = "#8a8f98"  # contrast 3.3 on white, 5.9 on Streamlit's dark page
# one colour per method or map key in every Trust chart, whatever its place: the beside chart draws the verdict's
# best map first, and colours by place made "Attention weights α" blue, orange or green by model and text
KEY_COLOURS = {
    "knockout": "#8a8f98",
    "random": "#7f7f7f",
    "sources": "#4c78a8",
    "attention": "#e45756",
    "attn_res_ln": "#54a24b",
    "rollout_attn_res_ln": "#f58518",
    "norm": "#b279a2",
    "attn_res": "#72b7b2",
    "ff_res": "#9d755d",
    "rollout_attention": "#ff9da6",
    "rollout_ff_res": "#d6a03b",
    "alti": "#eeca3b",
    "rollout_alti": "#c27ba0",
    "direct_heads": "#2f9e9e",
    "input_x_gradient": "#17becf",
    "integrated_gradients": "#9467bd",
}


def key_colour(key: str) -> str:
    """``key``'s colour in the Trust charts: :data:`KEY_COLOURS`, else one of :data:`BESIDE` picked by a stable
    checksum of the key (the same in every process, unlike ``hash``)."""
    import zlib

    return KEY_COLOURS.get(key) or BESIDE[1 + zlib.crc32(key.encode()) % (len(BESIDE) - 1)]


def score_bars(
    keys: list[str],
    mean,
    lo,
    hi,
    *,
    title: str = "",
    reference: str | None = None,
    font_size: int = 12,
    chance: str = "random",
    colour_keys: list[str] | None = None,
) -> go.Figure:
    """Horizontal bars of one score per attribution with its interval (lo, hi: nan draws no whisker);
    ``reference``'s bar (e.g. "attention") is drawn in another colour, or, given ``colour_keys`` (the method key of
    each bar), each bar in its key's colour (:func:`key_colour`). The whiskers are a mid grey that reads on a
    light and a dark page (plotly's default #444 vanished on the dark one)."""
    mean, lo, hi = (np.asarray(v, dtype=np.float64) for v in (mean, lo, hi))
    plus = np.where(np.isfinite(hi), hi - mean, 0.0)
    minus = np.where(np.isfinite(lo), mean - lo, 0.0)
    colours = ["#d62728" if k == reference else ("#7f7f7f" if k == chance else "#1f77b4") for k in keys]
    if colour_keys is not None:
        colours = [key_colour(k) for k in colour_keys]
    fig = go.Figure(
        go.Bar(
            y=list(keys),
            x=mean,
            orientation="h",
            marker_color=colours,
            error_x=dict(type="data", array=plus, arrayminus=minus, visible=True, color=WHISKER, thickness=2),
            hovertemplate="%{y}: %{x:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=dict(text=title, font=dict(size=font_size + 2)),
        height=max(260, 22 * len(keys) + 90),
        margin=dict(l=10, r=10, t=40, b=30),
        font=dict(size=font_size),
        yaxis=dict(autorange="reversed"),
    )
    return fig


def truth_beside(
    tokens: list[str],
    truth: np.ndarray,
    rows: dict[str, np.ndarray],
    *,
    truth_name: str = "knockout",
    font_size: int = 12,
    colour_keys: list[str] | None = None,
) -> go.Figure:
    """One text: the ground truth and each attribution over its tokens, each scaled by its largest |value| (so
    their shapes compare; the numbers are in the table beside). ``colour_keys``: the method key of each of
    ``rows`` (in order), which fixes its colour (:func:`key_colour`; knockout's for the truth) whatever its place;
    without it, colours follow the place."""
    fig = go.Figure()
    x = [f"{k}: {t}" for k, t in enumerate(tokens)]
    keyed = None if colour_keys is None else [key_colour(k) for k in ("knockout", *colour_keys)]
    for i, (name, values) in enumerate({truth_name: truth, **rows}.items()):
        v = np.asarray(values, dtype=np.float64)
        scale = np.nanmax(np.abs(v)) if v.size and np.nanmax(np.abs(v)) > 0 else 1.0
        fig.add_trace(
            go.Bar(
                x=x,
                y=v / scale,
                name=name,
                customdata=v,
                marker_color=BESIDE[i % len(BESIDE)] if keyed is None else keyed[i],
                hovertemplate=name + " %{x}: %{customdata:.4g}<extra></extra>",
            )
        )
    # the legend at the figure's foot, below the token names (at a stage font it sat on them and cut them)
    bottom = 30 + 5 * font_size
    fig.update_layout(
        barmode="group",
        height=330 + bottom,
        margin=dict(l=10, r=10, t=30, b=bottom),
        font=dict(size=font_size),
        yaxis_title="value / its largest |value|",
        legend=dict(orientation="h", yref="container", y=0, yanchor="bottom"),
        meta=dict(normviz="truth_beside"),
    )
    return fig
