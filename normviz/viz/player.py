"""The layer player: one map animated through the layers (plotly frames + slider; runs offline in HTML)."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmap import heatmap
from .labels import plotly_text


def layer_player(stack: np.ndarray, labels: list[str], *, title: str = "", positions: list[int] | None = None,
                 causal: bool = False, boundary: int | None = None, font_size: int = 12, present: bool = False,
                 width: int | None = None, colorbar_title: str = "", layer_names: list[str] | None = None,
                 start: int = 0, frame_ms: int = 700) -> go.Figure:
    """``stack`` [L, n, n]: one heatmap whose frames are the layers, with ▶/❚❚ buttons and a layer slider.
    One colour scale for all layers (min/max over the stack), so colours compare across frames. Frames carry
    only the main trace's z (names and the masked layer are shared), which keeps the HTML small."""
    s = np.asarray(stack, dtype=np.float64)
    L = s.shape[0]
    names = layer_names or [f"layer {li}" for li in range(L)]
    fig = heatmap(s[start], labels, title=f"{title} · {names[start]}" if title else names[start], positions=positions,
                  causal=causal, boundary=boundary, font_size=font_size, present=present, width=width,
                  colorbar_title=colorbar_title, zmin=float(np.nanmin(s)), zmax=float(np.nanmax(s)))
    mask = np.isnan(np.asarray(fig.data[0].z, dtype=np.float64))  # the causal mask (the same in every layer)

    def z_of(li):
        z = s[li].copy()
        z[mask] = np.nan
        return z

    fig.frames = [go.Frame(name=str(li), data=[go.Heatmap(z=z_of(li))], traces=[0],
                           layout=dict(title=dict(text=plotly_text(f"{title} · {names[li]}" if title else names[li]))))
                  for li in range(L)]
    step_args = dict(mode="immediate", frame=dict(duration=0, redraw=True), transition=dict(duration=0))
    fig.update_layout(
        sliders=[dict(active=start, currentvalue=dict(prefix=""), pad=dict(t=50),
                      steps=[dict(label=plotly_text(names[li]), method="animate", args=[[str(li)], step_args]) for li in range(L)])],
        updatemenus=[dict(type="buttons", direction="left", x=0.0, y=0.0, yanchor="top", xanchor="left",
                          pad=dict(t=50, r=10), showactive=False, buttons=[
                              dict(label="▶", method="animate", args=[None, dict(
                                  mode="immediate", fromcurrent=True, frame=dict(duration=frame_ms, redraw=True),
                                  transition=dict(duration=0))]),
                              dict(label="❚❚", method="animate", args=[[None], step_args])])],
        height=int(fig.layout.height + 110), margin=dict(b=110),
        meta=dict(normviz="layer_player", layers=L),
    )
    return fig
