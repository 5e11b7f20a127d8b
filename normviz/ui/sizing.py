"""Panel sizes from the width of the page's main column, measured in the browser (``components/main_width.js``)."""
from __future__ import annotations

import streamlit as st

from . import components

MAIN_COLUMN = '[data-testid="stMainBlockContainer"]'  # Streamlit's main column (also styled by normviz.ui.style)
GAP = 24  # px between columns with gap="medium"


def main_width() -> int | None:
    """The width in px of the page's main column, measured in the browser (to 40 px) by a tiny script
    component and kept for the session; None until it has reported (and under AppTest, which runs no JS).
    Panels are sized from it so that two fill a row at any screen width."""
    ss = st.session_state
    known = ss.get("_normviz_width")
    try:
        with st.sidebar:
            result = components.component("normviz_main_width")(
                key="nv_main_width", data={"known": known, "container": MAIN_COLUMN}, on_width_change=lambda: None)
        width = getattr(result, "width", None)
    except Exception:  # no components v2 (older Streamlit): the figures' own default size
        width = None
    if isinstance(width, (int, float)) and 200 <= width <= 8000:
        ss["_normviz_width"] = int(width)
    return ss.get("_normviz_width")


def panel_width(per_row: int, present: bool) -> int | None:
    """The px width one of ``per_row`` panels gets (columns with a medium gap), or None when unknown."""
    w = main_width()
    if w is None:
        return 820 if present else None
    return max(260, int((w - GAP * (per_row - 1)) / per_row) - 8)
