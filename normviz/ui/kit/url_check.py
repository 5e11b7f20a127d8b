"""Say so when Streamlit dropped the link's whole query string.

Streamlit ignores a query string longer than 524,288 characters or with more than 1,000 parameters
(``streamlit.runtime.state.query_params.sanitize_query_string``) before the script runs, with only a line in
the server's log: the page showed its defaults as if the link had none. :func:`install` wraps the function the
server's session calls so that a dropped query string arrives as one marker parameter
(``normviz_query_dropped=chars:N`` or ``fields:N``), and :func:`notice_dropped_query` says what happened.
(A browser rarely gets that far: the HTTP server refuses a request line of that size with 400 first; clients
that talk to the websocket directly do.)
"""

from __future__ import annotations

import streamlit as st

MARKER = "normviz_query_dropped"


def install() -> bool:
    """Wrap ``app_session.sanitize_query_string`` (once per process); False where this Streamlit has none."""
    try:
        from streamlit.runtime import app_session
    except ImportError:  # pragma: no cover - another Streamlit layout
        return False
    original = getattr(app_session, "sanitize_query_string", None)
    if original is None:
        return False
    if getattr(original, "_normviz_marks_drops", False):
        return True

    def sanitize(query_string: str) -> str:
        out = original(query_string)
        if query_string and not out:  # dropped whole: say why, in a parameter the pages read
            why = "chars" if len(query_string) > _limits()[0] else "fields"
            n = len(query_string) if why == "chars" else query_string.count("&") + 1
            return f"{MARKER}={why}:{n}"
        return out

    sanitize._normviz_marks_drops = True
    app_session.sanitize_query_string = sanitize
    return True


def _limits() -> tuple[int, int]:
    try:
        from streamlit.runtime.state.query_params import (
            CLIENT_STATE_QUERY_STRING_MAX_FIELDS,
            CLIENT_STATE_QUERY_STRING_MAX_LENGTH,
        )

        return int(CLIENT_STATE_QUERY_STRING_MAX_LENGTH), int(CLIENT_STATE_QUERY_STRING_MAX_FIELDS)
    except ImportError:  # pragma: no cover
        return 512 * 1024, 1000


def dropped_query_message(marker: str) -> str | None:
    """The visitor's message for a marker value ``chars:N`` / ``fields:N``; None for anything else."""
    why, _, n = str(marker).partition(":")
    if not n.isdigit() or len(n) > 12 or why not in ("chars", "fields"):
        return None
    chars, fields = _limits()
    what = (
        f"is {int(n):,} characters long, over this server's limit of {chars:,}"
        if why == "chars"
        else f"has {int(n):,} parameters, over this server's limit of {fields:,}"
    )
    return (
        f"The link's query string {what}, so all of it was ignored: the page shows its defaults, not the "
        "link's text and settings. Use a shorter link (a shorter text), or paste the text into the box."
    )


def notice_dropped_query(say) -> None:
    """Tell the visitor (``say("warning", …)``) when the link's query string was dropped, and drop the marker."""
    raw = st.query_params.get(MARKER)
    if raw is None:
        return
    message = dropped_query_message(raw)
    if message:
        say("warning", message)
    try:
        del st.query_params[MARKER]
    except KeyError:  # pragma: no cover
        pass
