"""What every page does around its body: the page config, the shared view + sidebar + style first, and the
top-level catch that turns an unexpected error into a short message (never a traceback)."""

from __future__ import annotations

import sys
import traceback
import uuid

import streamlit as st

from .interrupts import one_run_per_session
from .memory import bound_heap
from .messages import shorten_error
from .session_view import VIEW, load_view
from .settings import settings
from .sidebar import sidebar
from .state import ViewState
from .style import apply_style, font_size
from .theme import follow as follow_theme
from .url_fields import decode, spec_of

bound_heap()  # the server process: large freed buffers go back to the system (normviz.ui.kit.memory)


def presenting(view_key: str = VIEW) -> bool:
    """Stage mode: the session's view (kept under ``view_key``) once there is one, else the link's
    ``?present=1``."""
    if view_key in st.session_state:
        return bool(st.session_state[view_key].present)
    present = spec_of(ViewState, "present")
    return bool(present and decode(present, str(st.query_params.get("present", "0"))).value)


def page_config(title: str, icon: str, view_key: str = VIEW) -> None:
    """``st.set_page_config`` for a page: wide; in stage mode (``?present=1``) the sidebar starts
    collapsed, so two large panels fill the screen."""
    st.set_page_config(
        page_title=f"normviz · {title}",
        page_icon=icon,
        layout="wide",
        initial_sidebar_state="collapsed" if presenting(view_key) else "auto",
    )


def start_page(seq2seq: bool = False) -> tuple[ViewState, int]:
    """What every self-attention page does first: the shared view (URL / session), the sidebar, the style of
    its mode; returns the view and the font size of its figures. ``seq2seq``: the page also explains
    encoder–decoders (the sidebar offers the allowlist's)."""
    view = sidebar(load_view(), seq2seq)
    keep_widgets_across_stage(view.present)
    follow_theme(view)
    apply_style(view.present)
    return view, font_size(view.present)


SIDEBAR_WIDGETS = ("w_model_choice", "w_model_other", "w_present", "tr_present")  # drawn by sidebar() before the check
# Widgets Streamlit registers with writes_allowed=False (buttons, download buttons, uploads, camera/audio input,
# menu buttons) hold values of these kinds; a value set through session state makes them raise
# StreamlitValueAssignmentNotAllowedError when drawn (Esc on the Why page: its graph's download button, issue 42).
READ_ONLY_VALUE_TYPES = frozenset(
    {"trigger_value", "string_trigger_value", "json_trigger_value", "file_uploader_state_value"}
)
SETTABLE = (bool, int, float, str, type(None))


def settable(key: str) -> bool:
    """Whether widget ``key``'s value may be set again through session state: a widget that does not refuse it
    (by the kind of value Streamlit keeps for it) holding a plain value (None, bool, number, text, or a list of
    them). Selections of charts and data editors (dicts) and uploaded files are not plain: never set again."""
    from streamlit.runtime.state.session_state_proxy import get_session_state

    try:
        state = get_session_state()._state
        meta = state.get_widget_metadata(state.get_widget_id_from_key(key))
    except Exception:  # another Streamlit: judge by the value alone
        meta = None
    kind = getattr(meta, "value_type", None)
    value = st.session_state[key]
    if kind in READ_ONLY_VALUE_TYPES or (kind is None and (value is None or value == [])):
        return False  # an empty upload's record names no kind: an empty widget needs nothing sent again
    if isinstance(value, (list, tuple)):
        return all(isinstance(v, SETTABLE) for v in value)
    return isinstance(value, SETTABLE)


def keep_widgets_across_stage(present: bool, page_widgets: str = "w_") -> None:
    """Entering or leaving stage mode moves a page's controls between its column layout and stage mode's one
    compact bar (and the ⋯ popover, whose widgets the browser has not mounted while it stayed shut): the browser
    then drew some of them empty (Explore's View control with nothing selected after Esc). Each widget value is
    set again through session state on that run, so the browser is sent the value with the widget -- except
    where Streamlit refuses a set value (:func:`settable`: buttons, downloads, uploads)."""
    ss = st.session_state
    before = ss.get("_normviz_was_present")
    ss["_normviz_was_present"] = present
    if before is None or before == present:
        return
    for k in [k for k in ss if isinstance(k, str) and k.startswith(page_widgets) and k not in SIDEBAR_WIDGETS]:
        if settable(k):
            ss[k] = ss[k]


def run_page(body) -> None:
    """Run a page's ``body()``, one run of the visitor's session at a time (:mod:`normviz.ui.kit.interrupts`); an
    unexpected error becomes a short message (details in a collapsed section, none at all with
    ``NORMVIZ_PUBLIC=1``), never a traceback. Streamlit's own stop/rerun pass through."""
    from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

    conf = settings()
    if conf.public:
        try:
            st.set_option("client.showErrorDetails", "none")
        except Exception:  # pragma: no cover - older Streamlit
            pass
    try:
        with one_run_per_session():  # a burst of reruns: the run in flight, then the latest (ui.interrupts)
            body()
    except ScriptControlException:
        raise
    except Exception as exc:  # the top-level catch: nothing below reaches the visitor as a traceback
        ref = uuid.uuid4().hex[:8]
        print(f"normviz: unexpected error {ref} on {getattr(body, '__module__', '?')}:", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        st.error(
            f"Something went wrong on this page (error {ref}). Change the input or reload the page; "
            "if it keeps happening, tell the operator this error number."
        )
        if not conf.public:
            with st.expander("Details", expanded=False):
                st.text(f"{type(exc).__name__}: {shorten_error(exc)}")
                st.text("".join(traceback.format_exception(exc))[-4000:])
