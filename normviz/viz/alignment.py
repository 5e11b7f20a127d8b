"""A word alignment drawn as links between a row of source words (top) and a row of target words (bottom).

Takes words and link sets only (nothing about models). With a gold alignment each predicted link is coloured
by what it is: a sure gold link, a possible one, or wrong; sure gold links that were not predicted are drawn
dashed.
"""

from __future__ import annotations

import plotly.graph_objects as go

from .labels import abbreviate, plotly_text, word_step  # plotly_text: the one escaping function

WORD_DOT = "#8a8f98"  # a mid grey: 3.3:1 on a light page, 5.9:1 on a dark one (#444 was 1.9:1 there)
COLORS = {"predicted": "#1f77b4", "sure": "#2ca02c", "possible": "#98df8a", "wrong": "#d62728", "missed": "#7f7f7f"}
NAMES = {
    "predicted": "predicted",
    "sure": "predicted, sure gold",
    "possible": "predicted, possible gold",
    "wrong": "predicted, not in gold",
    "missed": "sure gold, not predicted",
}


def _x(n: int, width: int) -> list[float]:
    """n positions spread over 0 … width-1, centred."""
    if n <= 1:
        return [(width - 1) / 2]
    step = (width - 1) / (n - 1)
    return [i * step for i in range(n)]


def alignment_figure(
    src_words: list[str],
    tgt_words: list[str],
    links,
    *,
    sure=None,
    possible=None,
    title: str = "",
    font_size: int = 12,
    src_title: str = "source",
    tgt_title: str = "target",
    width_px: int | None = None,
) -> go.Figure:
    """Links ``(source word, target word)`` between the two rows of words (0-based indices). ``width_px``:
    the px the page gives the figure (default 1000): a row whose words do not fit side by side labels every
    step-th word (:func:`normviz.viz.labels.word_step`; the hover names each)."""
    width = max(len(src_words), len(tgt_words), 1)
    per_unit = max(100, int(width_px or 1000) - 20) / (width + 0.6)  # px per x unit (the range below)
    steps = []
    xs, xt = _x(len(src_words), width), _x(len(tgt_words), width)
    links = set(links)
    groups: dict[str, list] = {}
    if sure is None and possible is None:
        groups["predicted"] = sorted(links)
    else:
        sure = set(sure or ())
        possible = set(possible or ()) | sure
        groups["sure"] = sorted(links & sure)
        groups["possible"] = sorted((links & possible) - sure)
        groups["wrong"] = sorted(links - possible)
        groups["missed"] = sorted(sure - links)
    fig = go.Figure()
    for kind, pairs in groups.items():
        x, y, hover = [], [], []
        for s, t in pairs:
            if s >= len(src_words) or t >= len(tgt_words):
                continue
            x += [xs[s], xt[t], None]
            y += [1, 0, None]
            label = plotly_text(f"{src_words[s]} [{s}] → {tgt_words[t]} [{t}]")
            hover += [label, label, None]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines",
                name=NAMES[kind],
                hovertext=hover,
                hoverinfo="text",
                line=dict(
                    color=COLORS[kind], width=3 if kind != "missed" else 2, dash="dash" if kind == "missed" else "solid"
                ),
                showlegend=bool(pairs),
            )
        )
    for words, pos, y, where in ((src_words, xs, 1, "top center"), (tgt_words, xt, 0, "bottom center")):
        gap = (pos[1] - pos[0]) * per_unit if len(pos) > 1 else per_unit * width
        step = word_step(list(words), gap, font_size + 1)
        steps.append(step)
        fig.add_trace(
            go.Scatter(
                x=pos,
                y=[y] * len(words),
                mode="markers+text",
                text=[plotly_text(abbreviate(w, 12)) if i % step == 0 else "" for i, w in enumerate(words)],
                textposition=where,
                marker=dict(size=9, color=WORD_DOT),
                hoverinfo="text",
                showlegend=False,
                hovertext=[plotly_text(f"{w} [{i}]") for i, w in enumerate(words)],
                textfont=dict(size=font_size + 1),
            )
        )
    fig.update_xaxes(visible=False, range=[-0.8, width - 0.2])
    fig.update_yaxes(visible=False, range=[-0.45, 1.45])
    fig.update_layout(
        title=dict(text=plotly_text(title), font=dict(size=font_size + 2), x=0.0, xanchor="left"),
        font=dict(size=font_size),
        height=260 + 4 * font_size,
        margin=dict(l=10, r=10, t=50 + font_size, b=10),
        legend=dict(orientation="h", yanchor="top", y=-0.02, x=0),
        hovermode="closest",
        meta=dict(normviz="alignment", label_step=max(steps, default=1)),
        annotations=[
            dict(x=-0.8, y=1.3, xanchor="left", text=plotly_text(src_title), showarrow=False),
            dict(x=-0.8, y=-0.3, xanchor="left", text=plotly_text(tgt_title), showarrow=False),
        ],
    )
    return fig
