"""The layer player: one map animated through the layers (plotly frames + slider; runs offline in HTML)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmap import heatmap
from .labels import plotly_text


def layer_player(
    stack: np.ndarray,
    labels: list[str],
    *,
    title: str = "",
    positions: list[int] | None = None,
    causal: bool = False,
    boundary: int | None = None,
    font_size: int = 12,
    present: bool = False,
    width: int | None = None,
    colorbar_title: str = "",
    layer_names: list[str] | None = None,
    start: int = 0,
    frame_ms: int = 700,
) -> go.Figure:
    """``stack`` [L, n, n]: one heatmap whose frames are the layers, with ▶/❚❚ buttons and a layer slider.
    One colour scale for all layers (min/max over the stack), so colours compare across frames. Frames carry
    only the main trace's z (names and the masked layer are shared), which keeps the HTML small."""
    s = np.asarray(stack, dtype=np.float64)
    L = s.shape[0]
    names = layer_names or [f"layer {li}" for li in range(L)]
    fig = heatmap(
        s[start],
        labels,
        title=f"{title} · {names[start]}" if title else names[start],
        positions=positions,
        causal=causal,
        boundary=boundary,
        font_size=font_size,
        present=present,
        width=width,
        colorbar_title=colorbar_title,
        zmin=float(np.nanmin(s)),
        zmax=float(np.nanmax(s)),
    )
    mask = np.isnan(np.asarray(fig.data[0].z, dtype=np.float64))  # the causal mask (the same in every layer)

    def z_of(li):
        z = s[li].copy()
        z[mask] = np.nan
        return z

    fig.frames = [
        go.Frame(
            name=str(li),
            data=[go.Heatmap(z=z_of(li))],
            traces=[0],
            layout=dict(title=dict(text=plotly_text(f"{title} · {names[li]}" if title else names[li]))),
        )
        for li in range(L)
    ]
    step_args = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    under = int(fig.layout.margin.b or 0)  # the x labels and axis title: the slider starts below them
    slider_px, buttons_px = player_rows(int(fig.layout.font.size or font_size))
    fig.update_layout(
        sliders=[
            dict(
                active=start,
                currentvalue=dict(prefix=""),
                pad=dict(t=under),
                x=0.0,
                len=1.0,
                xanchor="left",
                y=0.0,
                yanchor="top",
                steps=[
                    dict(label=plotly_text(names[li]), method="animate", args=[[str(li)], step_args]) for li in range(L)
                ],
            )
        ],
        # the buttons on their own row under the slider (never over it, at any width)
        updatemenus=[
            dict(
                type="buttons",
                direction="left",
                x=0.0,
                y=0.0,
                yanchor="top",
                xanchor="left",
                pad=dict(t=under + slider_px, r=10),
                showactive=False,
                buttons=[
                    dict(
                        label="▶",
                        method="animate",
                        args=[
                            None,
                            dict(
                                mode="immediate",
                                fromcurrent=True,
                                frame=dict(duration=frame_ms, redraw=True),
                                transition=dict(duration=0),
                            ),
                        ],
                    ),
                    dict(label="❚❚", method="animate", args=[[None], step_args]),
                ],
            )
        ],
        height=int(fig.layout.height + slider_px + buttons_px + 20),
        margin=dict(b=under + slider_px + buttons_px),
        meta=dict(normviz="layer_player", layers=L, slider_px=slider_px),
    )
    return fig


def player_rows(font_px: int) -> tuple[int, int]:
    """(the slider's height, the buttons' row height) in px at a font of ``font_px``: the slider shows its current
    value (one line), the rail and one line of step labels; a button is one line plus its padding."""
    return 3 * font_px + 40, font_px + 24
