"""Instant layer/head switching on Explore: the page hands the browser the frames of its panels
(:mod:`normviz.ui.kit.frames`) and the ``components/instant_switch.js`` script redraws them as soon as the
controls named in :mod:`normviz.ui.kit.controls` move; the rerun that follows draws the same view from the server."""

from __future__ import annotations

import json
import sys

import streamlit as st

from . import components, controls
from .fetch import transformed_norms_of
from .state import ViewState


def instant_switch(frames: str | None) -> None:
    """Let the browser redraw the panels for a new layer or head as soon as the control moves, from
    ``frames`` (JSON of {chart key: {frame name: frame}}, :mod:`normviz.ui.kit.frames`). ``None``: every change
    waits for the server (lines view, comparisons, panels that depend on the layer but have no frames, or a
    view too large for the frame budget)."""
    st.session_state["_normviz_instant"] = frames  # what the browser was given (read by the tests)
    try:
        components.component("normviz_instant")(
            key="nv_instant",
            data={"enabled": bool(frames), "frames_json": frames or "", "controls": controls.watched()},
        )
    except Exception as exc:  # no components v2 (older Streamlit): the server draws every change
        print(f"normviz: instant switching off ({type(exc).__name__}: {exc})", file=sys.stderr)


def instant_frames(
    analysis,
    view: ViewState,
    keys: list[str],
    n_shown: int,
    lm,
    session=None,
    fx_panels: dict[str, list[int]] | None = None,
) -> str | None:
    """The frames of Explore's panels (``panel_<key>`` charts of ``n_shown`` tokens, and ``fx_<key>`` strips:
    ``fx_panels`` maps a key to its shown positions) for :func:`instant_switch`, kept for the session while
    the text, maps and drawing options stay the same, as JSON; None when none fit the budget."""
    from . import data, frames

    heads = [
        h
        for h in [None] + list(range(lm.n_heads))
        if data.dedupe_all_heads([k for k in view.maps if k in analysis], h)[0] == keys
    ]
    wanted = frames.plan(n_shown, len(keys), lm.n_layers, heads, view.layer, view.head)
    if not wanted:
        return None
    ident = (
        lm.name,
        view.text,
        view.pair,
        tuple(keys),
        view.hide_special,
        view.values,
        view.shared_scale,
        view.threshold,
        tuple(wanted),
        tuple(sorted(fx_panels or {})),
    )
    kept = st.session_state.get("_normviz_frames")
    if kept is not None and kept[0] == ident:
        return kept[1]
    got = frames.panel_frames(
        analysis,
        keys,
        wanted,
        hide_special=view.hide_special,
        values=view.values,
        shared_scale=view.shared_scale,
        threshold=view.threshold,
        causal=lm.is_causal,
    )
    out = {f"panel_{k}": v for k, v in got.items()}
    for k, keep in (fx_panels or {}).items():
        out[f"fx_{k}"] = frames.fx_frames(lambda layer: transformed_norms_of(session, layer), keep, wanted)
    try:  # kept as one JSON string: a fraction of the lists' memory, and parsed in the browser once
        text = json.dumps(out, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a range that is not a number (an empty panel): the server draws every change
        text = None
    st.session_state["_normviz_frames"] = (ident, text)
    return text
