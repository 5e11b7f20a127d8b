"""Stage mode (``?present=1``, the sidebar's presentation toggle): what a page needs on a projector.

The keyboard (←/→ layer, ↑/↓ head, Esc leaves stage mode; ``components/stage_keys.js``) moves the page's own
controls, so the URL, the instant switch and every panel follow as if the visitor had used them; every panel
names its model and text (:func:`context_line`), so a screenshot explains itself.
"""
from __future__ import annotations

import streamlit as st

from . import components

KEYS_WIDGET = "nv_stage_keys"


def move(key: str, options: list, step: int) -> None:
    """Move widget ``key`` ``step`` places along ``options`` (clamped at the ends)."""
    ss = st.session_state
    if key not in ss or not options:
        return
    i = options.index(ss[key]) if ss[key] in options else 0
    ss[key] = options[min(max(i + step, 0), len(options) - 1)]


def _on_key(layer_key: str, layers: list, head_key: str | None, heads: list, leave) -> None:
    pressed = (st.session_state.get(KEYS_WIDGET) or {}).get("key")
    if pressed in ("layer-", "layer+"):
        move(layer_key, layers, -1 if pressed == "layer-" else 1)
    elif pressed in ("head-", "head+") and head_key is not None:
        move(head_key, heads, -1 if pressed == "head-" else 1)
    elif pressed == "leave":
        leave()


def keyboard(layer_key: str, layers: list, head_key: str | None, heads: list, leave) -> None:
    """Arrow keys and Esc for this page: ``layer_key``/``head_key`` are the page's layer and head widgets
    (their ``layers``/``heads`` options in order), ``leave()`` turns stage mode off (from a callback: before
    the page's widgets are drawn)."""
    try:
        components.component("normviz_stage_keys")(
            key=KEYS_WIDGET, data={}, on_key_change=lambda: _on_key(layer_key, layers, head_key, heads, leave))
    except Exception:  # no components v2 (older Streamlit): the page's own controls still work
        pass


def leave_stage(view_key: str = "_normviz_view", toggle: str = "w_present") -> None:
    """Turn stage mode off for the view kept under ``view_key`` and its sidebar ``toggle`` (a key callback)."""
    ss = st.session_state
    ss[toggle] = False
    if view_key in ss:
        ss[view_key].present = False


def context_text(model: str, text: str, limit: int = 60, sep: str = " · ") -> str:
    """'minilm · “The cat sat on the…”' for a figure (plotly-escaped: shown literally)."""
    from normviz.viz.alignment import plotly_text

    words = " ".join(str(text).split())
    cut = words if len(words) <= limit else words[:limit - 1].rstrip() + "…"
    return plotly_text(f"{model}{sep}“{cut}”")


def context_line(fig, model: str, text: str, font_size: int) -> None:
    """Name the model and the text (cut) above a panel's title, inside its top margin: an exported PNG says
    what it shows. Shown literally (plotly would read ``<b>``, ``<a>`` … in it as markup)."""
    line = context_text(model, text)
    size = max(10, font_size - 2)
    fig.add_annotation(text=line, xref="paper", yref="paper", x=0.0, y=1.0, xanchor="left", yanchor="bottom",
                       yshift=font_size + 2 + 8 + 6, showarrow=False, font=dict(size=size, color="#7a8291"),
                       name="context")


def grid_clicks(charts: dict[str, int], cell: int) -> dict | None:
    """The square of Overview's grids clicked in the browser, as {"layer", "head" (None for a layer-level map),
    "chart"}, once (on the rerun the click causes), else None. ``charts``: chart key → heads shown; ``cell``: a
    square's side + 1 (the gap)."""
    try:
        result = components.component("normviz_grid_click")(
            key="nv_grid_click", data={"charts": list(charts), "cell": int(cell), "heads": dict(charts)},
            on_cell_change=lambda: None)
    except Exception:  # no components v2: the zoom's layer and head boxes still open any head
        return None
    got = getattr(result, "cell", None)
    if not isinstance(got, dict) or not isinstance(got.get("layer"), int):
        return None
    head = got.get("head")
    return {"layer": got["layer"], "head": head if isinstance(head, int) else None, "chart": got.get("chart")}
