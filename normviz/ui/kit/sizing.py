"""Panel sizes from the width of the page's main column and the window's height, measured in the browser
(``components/main_width.js``)."""

from __future__ import annotations

import streamlit as st

from . import components

MAIN_COLUMN = '[data-testid="stMainBlockContainer"]'  # Streamlit's main column (also styled by normviz.ui.kit.style)
GAP = 24  # px between columns with gap="medium"
STAGE_ABOVE = 240  # stage mode: px above the panels (the compact control bar, notes) plus the panel's title lines
HEATMAP_EXTRA = -10  # a heatmap's height minus its width (its top margin less the colour bar's room), about


def screen() -> tuple[int | None, int | None]:
    """(main column width, window height) in px, measured in the browser (to 40 / 20 px) by a tiny script
    component and kept for the session; None until it has reported (and under AppTest, which runs no JS)."""
    ss = st.session_state
    known = ss.get("_normviz_width"), ss.get("_normviz_height")
    try:
        with st.sidebar:
            result = components.component("normviz_main_width")(
                key="nv_main_width",
                data={"known": list(known), "container": MAIN_COLUMN},
                on_width_change=lambda: None,
                on_height_change=lambda: None,
            )
        width, height = getattr(result, "width", None), getattr(result, "height", None)
    except Exception:  # no components v2 (older Streamlit): the figures' own default size
        width = height = None
    if isinstance(width, (int, float)) and 200 <= width <= 8000:
        ss["_normviz_width"] = int(width)
    if isinstance(height, (int, float)) and 200 <= height <= 8000:
        ss["_normviz_height"] = int(height)
    return ss.get("_normviz_width"), ss.get("_normviz_height")


def main_width() -> int | None:
    """The width in px of the page's main column (:func:`screen`). Panels are sized from it so that two fill a
    row at any screen width."""
    return screen()[0]


def panel_width(per_row: int, present: bool) -> int | None:
    """The px width one of ``per_row`` panels gets (columns with a medium gap), or None when unknown. In stage
    mode also no taller than the window leaves under the control bar, so a row of panels is wholly on the
    first screen."""
    w, h = screen()
    if w is None:
        return 820 if present else None
    out = max(260, int((w - GAP * (per_row - 1)) / per_row) - 8)
    if present and h is not None:
        out = max(260, min(out, h - STAGE_ABOVE - HEATMAP_EXTRA))
    return out
