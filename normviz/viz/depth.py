"""Where a prediction's information sits at each depth: ``Explanation.sources_by_layer`` [L+1, n] as a
layers × tokens heatmap (numpy in, plotly out).

Cell (l, j) = ⟨g^l_j, x^l_j⟩, token position j's residual state entering layer l read by the frozen network
above it (row 0 = each input token's part, the last row = the output, nonzero only at the explained position).
Every row plus the biases injected above it is the logit (difference): the exact counterpart of the routes
graph's threshold picture. Colours centred on 0 (blue raises, red lowers, as the source bars), one scale for
the whole figure.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .labels import abbreviate, fit_labels
from .why import NEG, POS, _layout, txt

SIGNED = [[0.0, NEG], [0.5, "#f4f4f4"], [1.0, POS]]  # as the source bars: blue raises, red lowers


def depth_heatmap(
    by_layer,
    tokens: list[str],
    *,
    what: str = "the logit",
    title: str | None = None,
    font_size: int = 12,
    width: int | None = None,
    first_layer_label: str = "input",
) -> go.Figure:
    """Rows = depth (0 = the input tokens at the bottom … L = the output on top), columns = token positions."""
    z = np.asarray(by_layer, dtype=np.float64)
    L1, n = z.shape
    names = [f"{txt(t)} [{k}]" for k, t in enumerate(tokens)]
    if len(names) != n:
        raise ValueError(f"depth_heatmap: {len(names)} token labels for {n} columns")
    depth = [first_layer_label] + [f"after layer {l - 1}" for l in range(1, L1 - 1)] + ["output"]
    top = float(np.abs(z).max()) or 1.0
    custom = np.array([[f"{names[j]}, {depth[l]}" for j in range(n)] for l in range(L1)], dtype=object)
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(range(n)),
            y=list(range(L1)),
            colorscale=SIGNED,
            zmid=0,
            zmin=-top,
            zmax=top,
            customdata=custom,
            hovertemplate="%{customdata}: %{z:.4g}<extra></extra>",
            colorbar=dict(title=dict(text="part"), thickness=12),
        )
    )
    fit = fit_labels(n, max(160, int(width or 720) - 120), font_size=font_size)
    fig.update_xaxes(
        tickmode="array",
        tickvals=list(range(n))[:: fit.step],
        ticktext=[abbreviate(s, fit.max_chars) for s in names][:: fit.step],
        tickangle=-60 if n <= 14 else -90,
        tickfont=dict(size=fit.tick_font),
    )
    step = max(1, L1 // 12)
    fig.update_yaxes(
        title=dict(text="depth (layer input)"),
        tickmode="array",
        tickvals=list(range(L1))[::step],
        ticktext=[str(l) if 0 < l < L1 - 1 else ("in" if l == 0 else "out") for l in range(L1)][::step],
    )
    title = title or f"Where the prediction's information sits at each depth: part of {what}"
    return _layout(fig, title, font_size, 300 + 6 * L1 + 6 * font_size, meta=dict(normviz="depth_heatmap"))
