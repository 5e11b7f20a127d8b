"""Placing a figure on a page: the chart with its download format and file name, the focused token's outline."""

from __future__ import annotations

import streamlit as st

from normviz import viz

from .theme import themed


def image_format() -> str:
    """The chart toolbar's download format, PNG or SVG (the sidebar's choice, ``w_img``; not in the URL)."""
    return st.session_state.get("w_img", "png")


def chart(fig, key: str, filename: str, width: str = "stretch") -> None:
    """``st.plotly_chart`` whose toolbar camera downloads ``filename`` as PNG or SVG (:func:`image_format`);
    a figure that set its own width (many tokens need more room than the column) keeps it; its colours follow
    the page's theme (:func:`normviz.ui.kit.theme.themed`: no white glare on a dark page)."""
    themed(fig)
    own = getattr(fig.layout, "width", None)
    st.plotly_chart(
        fig, key=key, config=viz.plotly_config(filename=filename, fmt=image_format()), width="content" if own else width
    )


def outline_token(fig, k: int, n: int) -> None:
    """Outline row and column ``k`` (of ``n`` shown) of a heatmap: the focused token in every panel."""
    line = dict(color="#ff3b30", width=2)
    fig.add_shape(type="rect", x0=-0.5, x1=n - 0.5, y0=k - 0.5, y1=k + 0.5, line=line)
    fig.add_shape(type="rect", x0=k - 0.5, x1=k + 0.5, y0=-0.5, y1=n - 0.5, line=line)


def table(df, present: bool, hide_index: bool = False, **dataframe_kwargs) -> None:
    """A table of numbers: ``st.dataframe`` (sortable, scrolls), or in stage mode ``st.table``, whose text the
    stage CSS enlarges (a dataframe is drawn on a canvas at a fixed small size). Cells are shown as text."""
    if present:
        st.table(df.set_index(df.columns[0]) if hide_index and len(df.columns) else df)
    else:
        st.dataframe(df, hide_index=hide_index, **dataframe_kwargs)
