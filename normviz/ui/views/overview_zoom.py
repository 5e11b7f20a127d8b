"""Overview's "Zoom into a head" panel: one head of one layer, bounded whatever the text's length.

A short text (at most :data:`normviz.ui.views.long_maps.LONG_TOKENS` tokens) draws the head's n × n map with its
token labels, as before. A long one cannot: at 4,096 tokens that figure held 16.8 M cells and Streamlit refused the
message ("MessageSizeError: 416.7 MB exceeds 50 MB", issue 42), and the page's catch never saw it. There the head is
drawn as Explore's long view draws it: an overview at screen resolution (each cell the max of the block of tokens
under it, at most :data:`normviz.ui.views.long_maps.OVERVIEW_CELLS` blocks a side, on the log contrast), its layer
computed as Explore computes a long text's layer (in the worker where there is one, within the server's memory
budget), with the link to Explore for the full-resolution zoom window.
"""

from __future__ import annotations

import streamlit as st

from ... import viz
from ...core.errors import NormvizError
from ...viz.overview_figure import overview_heatmap
from ..kit import data
from ..kit.charts import chart
from ..kit.fetch import admitted
from ..kit.safe import plain
from . import long_maps

SCALE = "log"  # the long view's default contrast (long_view.DEFAULT_SCALE): a sink column does not blank the rest


def is_bounded(n_tokens: int) -> bool:
    """Whether the head is drawn cell for cell (else as an overview of at most OVERVIEW_CELLS² blocks)."""
    return not long_maps.is_long(n_tokens)


def draw(
    session,
    lm,
    key: str,
    layer: int,
    head: int | None,
    labels: list[str],
    font_size: int,
    width: int | None,
    present: bool,
    boundary: int | None,
    filename: str,
) -> None:
    """The zoomed head ``key`` at ``layer``/``head`` (None: a layer-level key) of ``session``'s text."""
    n = session.n_tokens
    if is_bounded(n):
        m = session.map(key, int(layer), head)
        fig = viz.heatmap(
            m,
            labels,
            title=data.panel_title(key, int(layer), head),
            font_size=font_size,
            colorbar_title=data.unit(key, "raw"),
            width=width,
            causal=lm.is_causal,
            boundary=boundary,
            present=present,
        )
        chart(fig, key="zoom_head", filename=filename)
        return
    cells = long_maps.overview_cells(width)
    here = n * n * session.itemsize
    remote = long_maps.remote(session)
    try:
        with (
            st.spinner(f"Computing layer {layer} of this {n:,}-token text…"),
            admitted(
                session,
                array_bytes=here if remote else 0,
                long_layer=True,
                records_here=not remote,
                what=f"a layer of this {n:,}-token text",
            ),
        ):
            panels, refused = long_maps.long_panels(session, [key], int(layer), head, False, "raw", cells, lm.is_causal)
    except NormvizError as exc:  # the memory budget; the worker stopped or past its deadline
        st.error(plain(str(exc), None))
        return
    if not panels:
        st.error(plain(f"{key}: {refused.get(key, 'not computed')}", None))
        return
    p = panels[0]
    fig = overview_heatmap(
        p.overview.of("max"),
        p.overview.row_edges,
        p.overview.col_edges,
        p.keep,
        aggregate="max",
        title=p.title,
        colorbar_title=data.unit(key, "raw"),
        font_size=font_size,
        width=width,
        scale=SCALE,
    )
    chart(fig, key="zoom_head", filename=filename)
    st.caption(
        plain(
            f"A {n:,}-token text: the head is drawn one cell per block of ~"
            f"{fig.layout.meta['tokens_per_cell']:.3g} tokens (the block's max), not cell for cell. "
            "Open it in Explore for a zoom window at full resolution.",
            None,
        )
    )


__all__ = ["SCALE", "draw", "is_bounded"]
