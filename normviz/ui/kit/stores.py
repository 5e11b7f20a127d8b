"""The server-wide caches, shared by every visitor (``st.cache_resource`` of :class:`normviz.ui.kit.cache.BoundedCache`)."""
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
