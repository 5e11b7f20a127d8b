"""A figure's colours for the page's theme (light or dark): numpy-free, plotly in, plotly out.

The figure builders draw for a light page: a diverging scale whose centre (a value 0) is white, masked cells and
frames in translucent mid grey. On a dark page that white centre is the brightest thing on the screen: most of a
head grid, a difference map or a depth map is near 0, so most of it glares, and the values that matter (far from
0) are the *darker* cells. :func:`for_theme` swaps each such colour for its twin of the other theme:

- the diverging scales (``RdBu_r`` of the heatmaps, the head grid and the score split; the depth map's
  red–blue scale) for scales whose centre is a grey just above the dark page and whose ends are bright, so the
  brightness grows with |value| on a dark page as the darkness grows with it on a light one;
- the masked cells' layer and the plot background (the frames and gaps) for an opaque dark grey;
- the routes graph's head edges and the bars' blue for a lighter blue that stands out from a dark page.

Twins go both ways (``for_theme(fig, "light")`` undoes ``"dark"``), so a cached figure can be shown in either
theme. Anything else (sequential scales such as Viridis, a user's colours) is left as it is.
"""

from __future__ import annotations

import plotly.graph_objects as go

DARK_BG = "#0e1117"  # Streamlit's dark page
DARK_MID = "#2b2f3a"  # the dark scales' centre: a value 0 just above the page, not a hole in it
DARK_MASKED = "#3b404c"  # masked cells and frames on a dark page: a flat grey, darker than any coloured cell

# blue (below 0) … dark centre … red (above 0), as RdBu_r; brightness grows with |value|
DIVERGING_DARK = [
    [0.0, "#a6d1f0"],
    [0.15, "#5aa4dc"],
    [0.32, "#2f6fb0"],
    [0.45, "#253a57"],
    [0.5, DARK_MID],
    [0.55, "#553030"],
    [0.68, "#b5483d"],
    [0.85, "#e8795f"],
    [1.0, "#fbc8b0"],
]
# the depth map's signed scale (red lowers … blue raises, as the source bars)
SIGNED_DARK = [
    [0.0, "#fbc8b0"],
    [0.15, "#e8795f"],
    [0.32, "#b5483d"],
    [0.45, "#553030"],
    [0.5, DARK_MID],
    [0.55, "#253a57"],
    [0.68, "#2f6fb0"],
    [0.85, "#5aa4dc"],
    [1.0, "#a6d1f0"],
]
POS_DARK = "#4f9be0"  # the light page's #1f63b4 (a "raises" bar, a head edge) lifted for a dark page
THEMES = ("light", "dark")


def _resolved(scale) -> tuple:
    """A colour scale as plotly stores it on a trace (a named scale becomes its list of (position, colour))."""
    return tuple(tuple(step) for step in go.Heatmap(colorscale=scale).colorscale)


def _twins() -> dict:
    from .depth import SIGNED
    from .heatmap import DIVERGING, MASKED_BG
    from .why import POS

    scales = [(_resolved(DIVERGING), _resolved(DIVERGING_DARK)), (_resolved(SIGNED), _resolved(SIGNED_DARK))]
    colours = [(MASKED_BG, DARK_MASKED), (POS, POS_DARK)]
    return {
        "light": {"scales": {d: l for l, d in scales}, "colours": {d: l for l, d in colours}},
        "dark": {"scales": {l: d for l, d in scales}, "colours": {l: d for l, d in colours}},
    }


_TWINS: dict | None = None


def twins(theme: str) -> dict:
    """{"scales": {other theme's resolved scale: this theme's}, "colours": {other's colour: this theme's}}."""
    global _TWINS
    if _TWINS is None:
        _TWINS = _twins()
    return _TWINS[theme]


def for_theme(fig: go.Figure, theme: str | None) -> go.Figure:
    """``fig`` with its light-page colours swapped for ``theme``'s twins (in place; returned). ``theme`` None or
    "" (the browser did not say) leaves it as built (light)."""
    if not theme:
        return fig
    if theme not in THEMES:
        raise ValueError(f"theme {theme!r}: use one of {', '.join(THEMES)}")
    swap = twins(theme)
    scales, colours = swap["scales"], swap["colours"]
    for trace in fig.data:
        scale = getattr(trace, "colorscale", None)
        if scale is not None:
            twin = scales.get(tuple(tuple(s) for s in scale))
            if twin is not None:
                trace.colorscale = twin
            elif len(scale) == 2 and scale[0][1] == scale[1][1] and scale[0][1] in colours:  # a flat layer
                trace.colorscale = [[0, colours[scale[0][1]]], [1, colours[scale[0][1]]]]
        _swap_colour(trace, "marker", colours)
        _swap_colour(trace, "line", colours)
    bg = fig.layout.plot_bgcolor
    if bg in colours:
        fig.layout.plot_bgcolor = colours[bg]
    return fig


def _swap_colour(trace, part: str, colours: dict) -> None:
    """A marker's or line's colour (one colour or one per point) swapped for its twin."""
    holder = getattr(trace, part, None)
    colour = getattr(holder, "color", None) if holder is not None else None
    if isinstance(colour, str):
        if colour in colours:
            holder.color = colours[colour]
    elif isinstance(colour, (list, tuple)) and colour and all(isinstance(c, str) for c in colour):
        if any(c in colours for c in colour):
            holder.color = [colours.get(c, c) for c in colour]


__all__ = ["DARK_BG", "DARK_MASKED", "DARK_MID", "DIVERGING_DARK", "SIGNED_DARK", "for_theme"]
