"""Links between the app's pages that carry the current view."""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlencode

import streamlit as st

from .session_view import VIEW
from .state import ViewState


def learn_link(key: str, label: str = "Learn more") -> None:
    """A link to the map's tab on the Learn page (the view travels in session state; ``lesson`` picks the tab)."""
    link_to_page("app_pages/2_Learn.py", f"{label} ↗", {"lesson": key})


def link_to_page(path: str, label: str, changes: dict) -> None:
    """A link to another page of the app that carries the current view with ``changes`` applied (a page link
    under ``st.navigation``; when a page runs on its own, a plain link to the same query)."""
    view = st.session_state.get(VIEW) or ViewState()
    view = replace(view, **{k: v for k, v in changes.items() if k in ViewState.__dataclass_fields__})
    query = view.to_query()
    try:
        st.page_link(path, label=label, query_params=query)
    except Exception:  # no navigation (a page run on its own): a plain link with the same query
        url_path = "" if "0_" in path else path.rsplit("_", 1)[-1].removesuffix(".py")
        st.link_button(label, "./" + url_path + ("?" + urlencode(query) if query else ""))
