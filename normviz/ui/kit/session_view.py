"""A page's view in the visitor's session and in the URL, and the widgets seeded from it.

The view (a :class:`normviz.ui.kit.state.QueryView`: :class:`ViewState` for Explore, Overview, Learn and Corpus,
:class:`TranslateView` for Translate) is read from the URL on the session's first run, kept in session state, and
written back to the URL after each change, so a copied link reproduces the page.
"""

from __future__ import annotations

import streamlit as st

from .messages import say
from .settings import settings
from .state import QueryView, V, ViewState

VIEW = "_normviz_view"


def view_from_url(cls: type[V], key: str) -> V:
    """The view kept under ``key``, read from the URL (``cls.from_query``) on the session's first run; what the
    link got wrong is shown as warnings then."""
    ss = st.session_state
    if key not in ss:
        ss[key] = cls.from_query(st.query_params.to_dict(), max_text_chars=settings().max_text_chars)
        for p in ss[key].problems:
            say("warning", p)
    from .url_check import notice_dropped_query

    notice_dropped_query(say)  # Streamlit drops a query string over 524,288 characters without a word
    return ss[key]


def load_view() -> ViewState:
    """The shared view of the self-attention pages: from the URL on the session's first run, then kept across
    pages; a page link's query (e.g. Learn's lesson, a head to open) applies on the first run of a page."""
    ss = st.session_state
    if VIEW not in ss:
        for p in settings().visitor_problems():  # public mode: no operator's path shown
            say("warning", p)
    view = view_from_url(ViewState, VIEW)
    if forget_widgets_on_page_change():
        view = ViewState.from_query(st.query_params.to_dict(), base=view, max_text_chars=settings().max_text_chars)
        ss[VIEW] = view
        for p in view.problems:
            say("warning", p)
    return view


def current_page() -> str:
    """An id of the page this run draws (Streamlit's page hash: one per page under ``st.navigation``)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return getattr(ctx, "page_script_hash", "") or "" if ctx is not None else ""


def forget_widgets_on_page_change() -> bool:
    """On the first run of a page after another page, drop every widget value (``w_*`` keys) so the page's
    widgets are seeded from the shared view again. A widget's value belongs to the page that drew it:
    Streamlit gives the same key on another page a new widget, which would start empty (the text was lost
    between Explore and Overview, issue 13) -- the view, kept in session state and the URL, is what pages share.
    True when the page changed (not on the session's first run)."""
    ss = st.session_state
    page = current_page()
    if ss.get("_normviz_page") == page:
        return False
    changed = "_normviz_page" in ss
    if changed:
        for k in [k for k in ss if isinstance(k, str) and k.startswith("w_")]:
            del ss[k]
    ss["_normviz_page"] = page
    return changed


def save_view(view: QueryView, key: str = VIEW) -> None:
    """Keep ``view`` for the session and put it in the URL."""
    st.session_state[key] = view
    st.query_params.from_dict(view.to_query())


def seed(key: str, value) -> None:
    """Give widget ``key`` its value from the view unless the widget already holds one."""
    if key not in st.session_state:
        st.session_state[key] = value


# a text box's URL parameter (the view's field it edits): what is typed there is written into the URL as it is typed
URL_PARAMS = {
    "w_text": "text",
    "w_trust_text": "text",
    "w_pair": "pair",
    "w_text_b": "text_b",
    "tr_src": "src",
    "tr_tgt": "tgt",
    "tr_model": "model",
}


def text_box(label: str, key: str, value: str, **kwargs) -> str:
    """``st.text_input`` seeded from the view (:func:`seed`) whose default is the view's text too. Streamlit sends a
    value set through session state with the widget once, in the run that registers it; a browser that mounts the
    box from a later run's message only falls back to the default, which was "" (a link's text became "The text is
    empty", docs/app.md). What the visitor types is also written into the URL as it is typed (:func:`url_follows`)."""
    seed(key, value)
    out = st.text_input(label, value, key=key, **kwargs)
    url_follows(key, out)
    return out


def url_follows(key: str, value: str) -> None:
    """What the visitor types into text box ``key`` (whose text in this run is ``value``) is not lost when the server
    goes away (``components/url_text.js``): the browser writes it into the URL's parameter ``URL_PARAMS[key]`` at
    each keystroke, and once the page's lost connection is back it loads the page again from that URL when a box
    holds a text no run has seen (else it asks for a run). The server writes the URL only after a run; a text
    typed while the server was away (its process killed and started again) reached no run, and the restarted
    server's new session ran from the URL's older text, with no note (issue 42). Mounted in the sidebar (no room
    taken beside the box); nothing where components v2 are missing."""
    param = URL_PARAMS.get(key)
    if param is None:
        return
    from . import components

    try:
        with st.sidebar:
            components.component("normviz_url_text")(
                key=f"nv_url_{key}",
                data={"key": key, "param": param, "value": str(value)},
                on_reconnected_change=lambda: None,
            )
    except Exception:  # no components v2 (older Streamlit): the URL follows the runs only, as before
        pass


TEXT_KEYS = "_normviz_text_keys"  # the running page's declared text-dependent widgets (tests read it)
FOLLOWED = "_normviz_followed_text"  # the model and text those widgets belong to


def follow_text(keys: tuple[str, ...], *text) -> bool:
    """A page's widgets that depend on its text -- ``keys``, the page's ONE declared list of every box that holds
    a position, a token or a key -- follow a new text (or model: another tokenisation): their values are dropped,
    so each is seeded for the new text instead of keeping an index or token of the old one (issue 29's position,
    issue 42's "Key token it attends to"). Call it after the text boxes, before those widgets are drawn; ``text``:
    the model and the text(s) read. True when a new text dropped them: the page then forgets the view's fields
    that seed them. The session's first run keeps the link's values."""
    ss = st.session_state
    ss[TEXT_KEYS] = tuple(keys)
    before, now = ss.get(FOLLOWED), tuple(str(t) for t in text)
    ss[FOLLOWED] = now
    if before is None or tuple(before) == now:
        return False
    for key in keys:
        ss.pop(key, None)
    return True


def seed_index(key: str, value: int | None, n: int, what: str, fallback=None, fallback_text: str | None = None) -> None:
    """Seed widget ``key`` with a position 0 … n-1 from the link (None is kept). A value out of range is
    replaced, with a visible note: by ``fallback`` when ``fallback_text`` is given, else clamped into range.
    Only on the widget's first run (later the widget holds its own value)."""
    if key in st.session_state:
        return
    if value is None or 0 <= value < n:
        st.session_state[key] = value
        return
    if fallback_text is None:
        fallback = n - 1 if value >= n else 0
        fallback_text = f"{what} {fallback}"
    st.session_state[key] = fallback
    say("warning", f"The link's {what}={value} is out of range (0 … {n - 1}); showing {fallback_text}.")
