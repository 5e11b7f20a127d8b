"""A long map's overview as a heatmap (:mod:`normviz.viz.overview`): one cell per block of tokens, drawn
on axes in token positions, with the zoom window outlined and the focus token's row marked.

The figure says which aggregate its cells show (title and hover: "max" or "mean" of the block). Cells are
placed at their blocks' centre positions, so a box selected on it is a token range (``layout.meta`` keeps the
block edges for the page). Where the shown tokens are consecutive positions (no hidden token between two shown
ones), the cells are drawn on the uniform grid of n / blocks tokens that ``overview.edges`` rounds to (every
block's drawn edges within half a token of its real ones): plotly.js then paints the heatmap as one image
(~40 ms for 256² cells in Chromium) instead of one rectangle per cell (~190 ms), four times per layer change.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from .heatmap import FOCUS_LINE, MASKED_BG, colorbar_dict, colorscale_for, title_dict

WINDOW_LINE = "#ff3b30"
AGGREGATE_TEXT = {
    "max": "max of each block (the strongest cell under it)",
    "mean": "mean of each block (its average cell)",
}


def block_centres(edges: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """Token position at the middle of each block (``edges`` index ``keep``, the shown positions)."""
    keep = np.asarray(keep)
    return (keep[edges[:-1]] + keep[edges[1:] - 1]) / 2.0


def uniform_grid(edges: np.ndarray, keep: np.ndarray) -> tuple[float, float] | None:
    """(first block's centre, block width) in token positions of the uniform grid the blocks ``edges`` (of the
    shown indices) round to, where the shown positions ``keep`` are consecutive; else None."""
    keep = np.asarray(keep)
    if len(keep) == 0 or int(keep[-1]) - int(keep[0]) + 1 != len(keep) or len(edges) < 2:
        return None
    step = float(edges[-1] - edges[0]) / (len(edges) - 1)
    return float(keep[0]) + float(edges[0]) - 0.5 + step / 2, step


def overview_heatmap(
    values: np.ndarray,
    row_edges: np.ndarray,
    col_edges: np.ndarray,
    keep: np.ndarray,
    *,
    aggregate: str,
    title: str = "",
    zmin: float | None = None,
    zmax: float | None = None,
    window: tuple[tuple[int, int], tuple[int, int]] | None = None,
    focus: int | None = None,
    colorbar_title: str = "",
    font_size: int = 12,
    width: int | None = None,
    scale: str = "linear",
) -> go.Figure:
    """``values`` [blocks_r, blocks_c] (an Overview's ``max`` or ``mean``; NaN: masked) with
    ``window`` = ((row start, stop), (col start, stop)) in shown indices outlined, ``focus`` (a token
    position) marked by lines along its row and column. ``scale``: how the values map to colours
    (:mod:`normviz.viz.contrast`: linear, rest, log, quantile), said in the title and the hover."""
    from .contrast import rescale

    values, zmin, zmax, scale_text, unit = rescale(values, scale, zmin, zmax)
    colorbar_title = colorbar_title + unit
    keep = np.asarray(keep)
    ys, xs = block_centres(row_edges, keep), block_centres(col_edges, keep)
    lo = zmin if zmin is not None else float(np.nanmin(values)) if np.isfinite(values).any() else 0.0
    colours, zmid = colorscale_for(0.0 if scale == "log" else lo)  # log10 of a non-negative map: sequential
    z = np.asarray(values, np.float32)
    tokens_per_cell = float(np.diff(row_edges).mean())
    hover = (
        f"tokens ≈%{{y:.0f}} ← ≈%{{x:.0f}} (cells of ~{tokens_per_cell:.3g} tokens): {aggregate}{unit} "
        "%{z:.4g}<extra></extra>"
    )
    side = int(max(200, (width or 600) - 150))
    gx, gy = uniform_grid(col_edges, keep), uniform_grid(row_edges, keep)
    place = dict(x0=gx[0], dx=gx[1], y0=gy[0], dy=gy[1]) if gx is not None and gy is not None else dict(x=xs, y=ys)
    trace = go.Heatmap(
        z=z,
        **place,
        zmin=zmin,
        zmax=zmax,
        zmid=zmid,
        colorscale=colours,
        hoverongaps=False,
        hovertemplate=hover,
        colorbar=colorbar_dict(colorbar_title, side, font_size),
    )
    shapes = []
    if window is not None:
        (r0, r1), (c0, c1) = window
        shapes.append(
            dict(
                type="rect",
                x0=keep[c0] - 0.5,
                x1=keep[c1 - 1] + 0.5,
                y0=keep[r0] - 0.5,
                y1=keep[r1 - 1] + 0.5,
                line=dict(color=WINDOW_LINE, width=2),
            )
        )
    if focus is not None:
        line = dict(color=FOCUS_LINE, width=1.5)
        end = float(keep[-1]) + 0.5
        shapes.append(dict(type="line", x0=-0.5, x1=end, y0=focus, y1=focus, line=line))
        shapes.append(dict(type="line", x0=focus, x1=focus, y0=-0.5, y1=end, line=line))
    axis = dict(showgrid=False, zeroline=False, constrain="domain", tickfont=dict(size=font_size))
    layout = dict(
        title=title_dict(f"{title} · overview: {aggregate}, {scale_text}", font_size),
        font=dict(size=font_size),
        plot_bgcolor=MASKED_BG,
        shapes=shapes,
        dragmode="select",
        xaxis=dict(axis, title=dict(text="contributing token j (position)", font=dict(size=font_size))),
        yaxis=dict(
            axis,
            autorange="reversed",
            scaleanchor="x",
            scaleratio=1,
            title=dict(text="receiving token i (position)", font=dict(size=font_size)),
        ),
        height=int(side + 60 + 2 * font_size + 60),
        margin=dict(l=70, r=110, t=50 + 2 * font_size, b=60),
        meta=dict(
            normviz="overview",
            aggregate=aggregate,
            scale=scale,
            blocks=[int(len(ys)), int(len(xs))],
            tokens_per_cell=tokens_per_cell,
        ),
    )
    if width is not None:
        layout["width"] = int(width)
    return go.Figure(data=[trace], layout=layout)


def positions_to_shown(keep: np.ndarray, lo: float, hi: float) -> tuple[int, int]:
    """A selected span of token positions [lo, hi] as shown indices (start, stop)."""
    keep = np.asarray(keep)
    a = int(np.searchsorted(keep, np.ceil(min(lo, hi) - 0.5)))
    b = int(np.searchsorted(keep, np.floor(max(lo, hi) + 0.5), side="right"))
    a = min(max(a, 0), len(keep) - 1)
    return a, max(a + 1, min(b, len(keep)))


__all__ = ["AGGREGATE_TEXT", "block_centres", "overview_heatmap", "positions_to_shown"]
