"""Loading a model for a page (shared by every visitor, progress shown on first use), and the sidebar line
that names it."""

from __future__ import annotations

import os

import streamlit as st

import normviz
from normviz.core.errors import NormvizError

from .interrupts import deferred_interrupts
from .messages import say, shorten_error
from .safe import plain
from .state import check_model_allowed, model_allowlist
from .stores import model_cache


def load_model(name: str):
    """The loaded model, or None after showing why not. A first load shows its progress."""
    msg = check_model_allowed(name, model_allowlist())
    if msg:
        say("error", msg)
        return None
    if not name.strip():
        st.error("No model chosen: pick one in the sidebar.")
        return None
    key = name.strip().lower() if name.strip().lower() in normviz.EMBEDDED else name.strip()
    cache = model_cache()
    if key in cache:
        return cache.get(key)
    slot = st.empty()
    try:
        with slot.status(f"Loading {plain(key, 80)}… (first use only)", expanded=True) as status:

            def progress(message):
                status.text(str(message)[:300])

            with deferred_interrupts() as deferred:  # a rerun meanwhile waits for the load (ui.interrupts)
                lm = cache.get_or_compute(key, lambda: normviz.load(key, progress=deferred.wrap(progress)))
        slot.empty()
        return lm
    except NormvizError as exc:
        slot.empty()
        say("error", _load_failure(key, exc))
    except Exception as exc:  # anything unexpected still reads as a message, never a traceback
        slot.empty()
        say("error", _load_failure(key, exc, unexpected=True))
    return None


def show_device(lm) -> None:
    """The sidebar line naming the model, its shape, device and dtype; a model on the raw-attention floor (no
    architecture row) says so there, and its one note (what it gets, what needs a row) heads the page."""
    note = getattr(lm, "note", None)
    kind = "no architecture row: raw attention" if note else f"{lm.spec.placement}-LN"
    with st.sidebar:
        st.caption(
            f"**{plain(lm.name, 80)}** · {kind} · {lm.n_layers} layers × {lm.n_heads} heads  \n"
            f"device **{lm.device}** · dtype **{str(lm.dtype).replace('torch.', '')}**"
        )
        licence = getattr(normviz.EMBEDDED.get(str(lm.name).strip().lower()), "licence", None)
        if licence:  # an embedded model offered under its own terms (gemma3: Gemma's), named where it is shown
            st.caption(f"Licence: {licence}.")
    if note:
        say("info", note)


def _path_like(name: str) -> bool:
    try:
        exists = os.path.exists(name)
    except (OSError, ValueError):
        exists = False
    return name.startswith((".", "/", "~", "\\")) or name.count("/") > 1 or "\\" in name or exists


def _load_failure(name: str, exc: Exception, unexpected: bool = False) -> str:
    """Why a model could not be loaded; for a name that looks like a server path the message is the same
    whether or not the directory exists, so the field cannot be used to explore the server's files."""
    if _path_like(name):
        return (
            f"Could not load {name[:200]!r}: it is not an embedded model ({', '.join(normviz.EMBEDDED)}) nor a "
            "model directory this server can load. (The server's operator can run `python -m normviz export "
            "--model DIR …` there for the exact reason.)"
        )
    if unexpected:
        return f"Could not load {name[:200]!r}: {type(exc).__name__}: {shorten_error(exc)}"
    return shorten_error(exc, 600)
