"""The server-wide caches, shared by every visitor (``st.cache_resource`` of
:class:`normviz.ui.kit.cache.BoundedCache`)."""

from __future__ import annotations

import streamlit as st

from .cache import BoundedCache

MODELS = 3
SESSION_ENTRIES = 12  # each keeps its records (one forward pass's tensors) and the maps computed so far


@st.cache_resource(show_spinner=False)
def model_cache() -> BoundedCache:
    """Loaded models, shared by every session and never mutated (at most 3 kept)."""
    return BoundedCache(MODELS)


@st.cache_resource(show_spinner=False)
def session_cache() -> BoundedCache:
    """Sessions keyed on (model source, revision, device, dtype, text, pair, target, token cap, options), shared
    by every visitor: a text analysed once is never recorded again, and each map of it is computed once."""
    return BoundedCache(SESSION_ENTRIES)


def _active(visitor: str) -> bool:
    """Whether the Streamlit session ``visitor`` is still connected (False outside a running server)."""
    try:
        from streamlit.runtime import Runtime

        return Runtime.exists() and Runtime.instance().is_active_session(visitor)
    except Exception:  # pragma: no cover - no runtime: treat as gone
        return False


@st.cache_resource(show_spinner=False)
def server_memory():
    """The server-wide memory budget over :func:`session_cache` (:mod:`normviz.ui.kit.server_memory`;
    NORMVIZ_SERVER_MEMORY_MB), sweeping away the texts of visitors who left."""
    from .server_memory import ServerMemory, limit_mb
    from .settings import settings

    budget = ServerMemory(session_cache(), int(limit_mb(settings().server_memory_mb) * 2**20))
    budget.start_sweeping(_active)
    return budget


def visitor_id() -> str | None:
    """The Streamlit session id of the current script run (None outside one)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx

        ctx = get_script_run_ctx(suppress_warning=True)
        return None if ctx is None else ctx.session_id
    except Exception:  # pragma: no cover
        return None
