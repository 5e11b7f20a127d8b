"""The page's theme in the URL (``theme=dark|light``), so a link opens in the theme it was made in.

Streamlit chooses the theme in the browser (the visitor's menu choice, else the system setting) and tells the
server which one is shown (``st.context.theme.type``). :func:`follow` reconciles the two: a link's theme that
differs from the one shown is applied once in the browser (``components/theme.js``: stored where Streamlit reads
it, then one reload); once they agree, the theme shown is the view's, so a later choice in the menu is what the
URL and every link the app makes carry.

:func:`figure_theme` is the theme the figures are drawn for (:func:`normviz.viz.theme.for_theme`): the one shown,
else (AppTest, a browser that does not say) the link's.
"""

from __future__ import annotations

import streamlit as st

from . import components

THEMES = ("dark", "light")
_AGREED = "_normviz_theme_agreed"
_FIGURES = "_normviz_figure_theme"


def shown() -> str | None:
    """The theme the browser shows ("dark"/"light"), None where it does not say (AppTest, older Streamlit)."""
    try:
        kind = st.context.theme.type
    except Exception:
        return None
    return kind if kind in THEMES else None


def follow(view) -> None:
    """Keep ``view.theme`` and the browser's theme together (see the module's docstring)."""
    have = shown()
    st.session_state[_FIGURES] = have or view.theme
    if have is None:
        return
    ss = st.session_state
    if view.theme and view.theme != have and not ss.get(_AGREED):
        try:
            components.component("normviz_theme")(key="nv_theme", data={"want": view.theme})
        except Exception:  # no components v2: the browser's theme stays
            pass
        return
    ss[_AGREED] = True
    view.theme = have


def figure_theme() -> str:
    """The theme this run's figures are drawn for: "dark", "light" or "" (not known: as built, light)."""
    return shown() or st.session_state.get(_FIGURES, "") or ""


def themed(fig):
    """``fig`` dressed for the page, in place: the colours of :func:`figure_theme`
    (:func:`normviz.viz.theme.for_theme`) and its own font size on every axis, colour bar and legend, which
    Streamlit's chart theme would otherwise set to ~12 px (:func:`normviz.viz.fonts.own_fonts`)."""
    from normviz.viz.fonts import own_fonts
    from normviz.viz.theme import for_theme

    return own_fonts(for_theme(fig, figure_theme()))
