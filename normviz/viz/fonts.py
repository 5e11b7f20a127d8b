"""Every label of a figure at the figure's own font size, whatever the page's chart theme says.

Streamlit's chart theme (``st.plotly_chart``'s default) gives every axis's tick labels 0.75 rem and its title
0.875 rem (12 / 14 px; 15 / 17.5 px at the stage's 20-px root font), and a colour bar's and a legend's text the
same, unless the figure names a size there: ``layout.font.size`` alone does not reach them. A stage figure built at
18 px therefore drew 15-px ticks (the depth map's layers, the bars' values, the lens's axes). :func:`own_fonts` writes
``layout.font.size`` into each of those places that names no
size of its own; sizes a figure chose (labels shrunk to fit many tokens) stay.
"""

from __future__ import annotations

import plotly.graph_objects as go


def own_fonts(fig: go.Figure) -> go.Figure:
    """``fig`` with its font size (``layout.font.size``; none: left as it is) on every axis's ticks and title, every
    colour bar's ticks and title and the legend, where they name no size (in place; returned)."""
    size = fig.layout.font.size
    if not size:
        return fig
    for axis in list(fig.select_xaxes()) + list(fig.select_yaxes()):
        if axis.tickfont.size is None:
            axis.tickfont.size = size
        if axis.title.font.size is None:
            axis.title.font.size = size
    for trace in fig.data:
        for holder in (trace, getattr(trace, "marker", None)):
            bar = getattr(holder, "colorbar", None) if holder is not None else None
            if bar is None or (
                holder is not trace
                and getattr(holder, "showscale", None) is not True
                and getattr(holder, "colorscale", None) is None
            ):
                continue
            if bar.tickfont.size is None:
                bar.tickfont.size = size
            if bar.title.font.size is None:
                bar.title.font.size = size
    if fig.layout.legend.font.size is None:
        fig.layout.legend.font.size = size
    return fig


__all__ = ["own_fonts"]
