"""Explore on a long text (more than ``long_maps.LONG_TOKENS`` tokens): overviews, a zoom window, search, focus.

Drawn instead of the short view's panels (the numbers: :mod:`normviz.ui.views.long_maps`). Each shown map of the
current layer/head is an overview at screen resolution — every cell the max (or mean, the visitor's choice;
the chart's title says which) of the block of tokens under it — and under it the zoom window at full
resolution. The window is moved by dragging the two range sliders, by a box drawn on an overview, by typing a
range (``1200-1264`` or ``1200-1264 / 0-64``), or by finding a token by its text (the window jumps to it and
it becomes the focus token, whose row is drawn in full below). A layer or head change computes that layer
alone (``Session.maps``); nothing of the whole [L, …] arrays is made, and the browser's instant-switch frames
(``ui.frames``: every layer's panels, (L + H)·n² numbers) are not built.
"""

from __future__ import annotations

import numpy as np
import streamlit as st

from ... import viz
from ...core.errors import InputError, NormvizError
from ...viz.contrast import NAMES as SCALE_NAMES
from ...viz.contrast import SCALES
from ...viz.heatmap import causal_mask
from ...viz.labels import plotly_text, unique_labels
from ...viz.overview_figure import AGGREGATE_TEXT, overview_heatmap, positions_to_shown
from ..kit import data
from ..kit.charts import image_format
from ..kit.fetch import admitted
from ..kit.instant import instant_switch
from ..kit.interrupts import deferred_interrupts
from ..kit.keys import known_keys, title
from ..kit.safe import plain
from ..kit.theme import themed
from . import long_maps

ROWS, COLS = "w_zoom_rows", "w_zoom_cols"  # the window, in token positions (inclusive ends)
AGG, RANGE, FIND = "w_agg", "w_range", "w_find"
SCALE = "w_ov_scale"  # the overviews' colour scale (normviz.viz.contrast)
# log by default: on linear, a first token that takes most of every row (an attention sink) left the rest of a long
# document's overview one dark colour (issue 42 item 8); the title says the scale, the control offers the others
DEFAULT_SCALE = "log"
FOCUS = "w_focus"
TEXT_KEYS = (ROWS, COLS, RANGE, FIND)  # positions and a token of the text: Explore's TEXT_KEYS include them
_MSG = "_normviz_long_msg"


def applies(session) -> bool:
    return long_maps.is_long(session.n_tokens)


def _set_window(rows: tuple[int, int], cols: tuple[int, int]) -> None:
    """Both sliders to these position ranges (start, stop)."""
    st.session_state[ROWS] = (int(rows[0]), int(rows[1]) - 1)
    st.session_state[COLS] = (int(cols[0]), int(cols[1]) - 1)


def _jump_to(position: int, n: int) -> None:
    """The window centred on token ``position``."""
    w = long_maps.centred(position, n, long_maps.WINDOW)
    _set_window(w, w)


def _typed_range(n: int) -> None:
    st.session_state.pop(_MSG, None)
    text = st.session_state.get(RANGE, "")
    if not str(text).strip():
        return
    try:
        rows, cols = long_maps.parse_range(text, n)
    except InputError as exc:
        st.session_state[_MSG] = str(exc)
        return
    _set_window(rows, cols)


def _found(labels: list[str], n: int) -> None:
    st.session_state.pop(_MSG, None)
    query = st.session_state.get(FIND, "")
    hits = long_maps.find_tokens(labels, query)
    if not str(query).strip():
        return
    if not hits:
        st.session_state[_MSG] = f"No token holds {query!r}."
        return
    st.session_state[FOCUS] = hits[0]
    _jump_to(hits[0], n)


def _focused(n: int) -> None:
    pos = st.session_state.get(FOCUS)
    if pos is not None:
        _jump_to(int(pos), n)


def _boxes(keys: list[str], keep_positions: np.ndarray) -> None:
    """A box drawn on an overview (its selection state) moves the window there, once per new box."""
    for k in keys:
        event = st.session_state.get(f"ov_{k}")
        try:
            box = event["selection"]["box"][0]
            xs, ys = box["x"], box["y"]
        except (KeyError, IndexError, TypeError):
            continue
        sig = (k, tuple(xs), tuple(ys))
        if st.session_state.get("_normviz_long_box") == sig:
            continue
        st.session_state["_normviz_long_box"] = sig
        rows = positions_to_shown(keep_positions, min(ys), max(ys))
        cols = positions_to_shown(keep_positions, min(xs), max(xs))
        rows = long_maps.clamp_window(rows, len(keep_positions))
        cols = long_maps.clamp_window(cols, len(keep_positions))
        _set_window(
            (keep_positions[rows[0]], keep_positions[rows[1] - 1] + 1),
            (keep_positions[cols[0]], keep_positions[cols[1] - 1] + 1),
        )


def draw(session, lm, view, font_size: int, width: int | None, present: bool = False) -> None:
    """The long view of ``view``'s maps at its layer and head (the page has drawn the controls above)."""
    instant_switch(None)  # no frames: each layer change is drawn by the server from that layer alone
    n = session.n_tokens
    labels = unique_labels(list(session.labels))
    known = set(known_keys(lm))
    keys, merged = data.dedupe_all_heads([k for k in dict.fromkeys(view.maps) if k in known], view.head)
    if not keys:
        st.info("Choose at least one map in the sidebar.")
        return
    special = np.asarray(session.encoded.special, bool)
    keep = long_maps.kept_positions(special, view.hide_special)
    _boxes(keys, keep)
    ss = st.session_state
    if FOCUS not in ss:  # from the link
        ss[FOCUS] = view.focus if view.focus is not None and 0 <= view.focus < n else None
    if ROWS not in ss or COLS not in ss:
        first = long_maps.centred(0 if view.focus is None else view.focus, n)
        _set_window(first, first)
    for k in (ROWS, COLS):  # a window from another text, or dragged wider than the window allows
        a, b = ss[k]
        a, b = long_maps.clamp_window((a, b + 1), n)
        ss[k] = (a, b - 1)

    st.caption(
        plain(
            f"A long text ({n:,} tokens, more than {long_maps.LONG_TOKENS}): each map is drawn as an overview, one "
            f"cell "
            "per block of tokens (the max or the mean of the block, as its title says), with the zoom window outlined; "
            f"under it the window at full resolution (at most {long_maps.MAX_WINDOW} tokens a side). A layer or head "
            "change computes that layer alone.",
            None,
        )
    )
    aggregate, scale = _draw_controls(session, view, labels)
    rows = _shown_range(keep, ss[ROWS])
    cols = _shown_range(keep, ss[COLS])
    panels = _layer_panels(session, lm, view, keys, long_maps.overview_cells(width))
    if not panels:
        return
    ranges = long_maps.color_ranges(panels, aggregate, view.shared_scale)
    config = dict(viz.plotly_config(filename=f"normviz_{lm.name}_layer{view.layer}", fmt=image_format()))
    config["modeBarButtonsToRemove"] = ["lasso2d"]  # the box select moves the zoom window
    for start in range(0, len(panels), 2):
        for col, p, rng in zip(st.columns(2, gap="medium"), panels[start : start + 2], ranges[start : start + 2]):
            with col:
                _panel(p, rng, aggregate, rows, cols, view, lm, labels, font_size, width, present, config, scale)
    notes = [x for x in (data.all_heads_note(keys, view.head), merged) if x]
    for x in notes:
        st.caption(x)
    if view.focus is not None:
        _focus_rows(panels, view.focus, labels, font_size)
    off = [
        what
        for what, on in (
            ("the lines view", view.draw == "lines"),
            ("the difference panel", bool(view.diff)),
            ("the layer player", bool(view.player)),
            ("comparisons", view.compare != "none"),
        )
        if on
    ]
    if off:
        st.caption(f"Not drawn for long texts: {', '.join(off)} (texts of at most {long_maps.LONG_TOKENS} tokens).")


def _draw_controls(session, view, labels: list[str]) -> tuple[str, str]:
    """The overviews' cells and contrast, find a token, zoom to tokens, the focus token, the window's two sliders.
    Gives (the cells' aggregate, the contrast scale)."""
    n, ss = session.n_tokens, st.session_state
    c1, c5, c2, c3, c4 = st.columns([2, 2, 3, 3, 3])
    with c1:
        ss.setdefault(AGG, "max")
        aggregate = (
            st.segmented_control(
                "Overview cells",
                list(long_maps.AGGREGATES),
                key=AGG,
                required=True,
                help="Max: the strongest cell of each block (a single sharp contribution stays visible). Mean: the "
                "block's average (its overall mass; a decoder's masked cells are left out).",
            )
            or "max"
        )
    with c5:
        ss.setdefault(SCALE, DEFAULT_SCALE)
        scale = st.selectbox(
            "Overview contrast",
            list(SCALES),
            key=SCALE,
            format_func=lambda s: SCALE_NAMES[s].capitalize(),
            help="Log (the default): ten-fold steps, 4 decades, so the cells beside a dominant first token stay "
            "readable (a signed map keeps linear, said in its title). Linear: the panels' colour scale (a first "
            "token that takes most of every row leaves the rest one "
            "dark colour). Row share without the first column: each row divided by the sum of its other "
            "blocks. Quantile: each cell's rank. The title says which.",
        )
    with c2:
        st.text_input(
            "Find a token (its text)",
            key=FIND,
            on_change=_found,
            args=(list(session.labels), n),
            placeholder="e.g. mayor",
            help="Jumps the zoom window to the first token holding this text and focuses it (its row is drawn below).",
        )
    with c3:
        st.text_input(
            "Zoom to tokens",
            key=RANGE,
            on_change=_typed_range,
            args=(n,),
            placeholder="e.g. 1200-1264 or 1200-1264 / 0-64",
            help="Rows and columns (positions, ends included), or rows / columns.",
        )
    with c4:
        if ss.get(FOCUS) not in [None] + list(range(n)):
            ss[FOCUS] = None
        view.focus = st.selectbox(
            "Focus a token",
            [None] + list(range(n)),
            key=FOCUS,
            on_change=_focused,
            args=(n,),
            placeholder="no token (type to search)",
            format_func=lambda i: "no token" if i is None else f"{labels[i]} [{i}]",
            help="Its row is drawn below over every token; the window jumps to it.",
        )
    if ss.get(_MSG):
        st.error(plain(ss[_MSG], None))
    query = ss.get(FIND, "")
    if str(query).strip():
        hits = long_maps.find_tokens(list(session.labels), query)
        if hits:
            shown = ", ".join(f"{labels[i]} [{i}]" for i in hits[:12]) + (" …" if len(hits) > 12 else "")
            st.caption(plain(f"{len(hits)} token(s) hold {query!r}: {shown}", None))
    s1, s2 = st.columns(2)
    with s1:
        st.slider("Zoom window: receiving tokens i (drag)", 0, n - 1, key=ROWS)
    with s2:
        st.slider("Zoom window: contributing tokens j (drag)", 0, n - 1, key=COLS)
    return aggregate, scale


def _layer_panels(session, lm, view, keys: list[str], cells):
    """The layer's panels (a refused key said), or None after the message of a refusal of the whole layer."""
    n = session.n_tokens
    # the layer's maps: in the worker process where there is one (the records live there; the server keeps
    # the maps of the last layers), else here; within the server's memory budget either way (it counts the
    # worker processes too: their layer's working set is reserved while the job runs)
    remote = long_maps.remote(session)
    here = len(keys) * n * n * session.itemsize
    bar = st.empty()
    try:
        with (
            st.spinner(f"Computing layer {view.layer} ({', '.join(title(k) for k in keys)})…"),
            admitted(
                session,
                array_bytes=here if remote else 0,
                long_layer=True,
                records_here=not remote,
                what=f"a layer of this {n:,}-token text",
            ),
            deferred_interrupts() as deferred,
        ):
            panels, refused = long_maps.long_panels(
                session,
                keys,
                view.layer,
                view.head,
                view.hide_special,
                view.values,
                cells,
                lm.is_causal,
                progress=deferred.wrap(
                    lambda f, m: bar.progress(min(1.0, max(0.0, f)), text=plain(f"Layer {view.layer}: {m}", None))
                ),
            )
    except NormvizError as exc:  # the memory budget; the worker stopped or past its deadline
        bar.empty()
        st.error(plain(str(exc), None))
        return None
    bar.empty()
    for k, why in refused.items():
        st.error(plain(f"{title(k)}: {why}", None))
    return panels


def _shown_range(keep: np.ndarray, positions: tuple[int, int]) -> tuple[int, int]:
    a = long_maps.shown_index(keep, positions[0])
    b = long_maps.shown_index(keep, positions[1]) + 1
    return long_maps.clamp_window((a, b), len(keep))


def _panel(
    p, rng, aggregate, rows, cols, view, lm, labels, font_size, width, present, config, scale: str = "linear"
) -> None:
    focus = view.focus if view.focus is not None and view.focus in set(p.keep.tolist()) else None
    fig = overview_heatmap(
        p.overview.of(aggregate),
        p.overview.row_edges,
        p.overview.col_edges,
        p.keep,
        aggregate=aggregate,
        title=p.title,
        zmin=rng[0],
        zmax=rng[1],
        window=(rows, cols),
        focus=focus,
        colorbar_title=data.unit(p.key, view.values),
        font_size=font_size,
        width=width,
        scale=scale,
    )
    st.plotly_chart(
        themed(fig),
        key=f"ov_{p.key}",
        config=config,
        on_select="rerun",
        selection_mode=("box",),
        width="content" if width else "stretch",
    )
    st.caption(
        plain(
            f"Overview: {AGGREGATE_TEXT[aggregate]}, ~{fig.layout.meta['tokens_per_cell']:.3g} tokens a "
            "cell. Draw a box on it to zoom there.",
            None,
        )
    )
    win, rs, cs = p.window(rows, cols)
    rpos, cpos = p.keep[rs].tolist(), p.keep[cs].tolist()
    masked = causal_mask(rpos, cpos) if lm.is_causal else None
    zoom = viz.heatmap(
        data.thresholded(win, view.threshold),
        [labels[i] for i in rpos],
        [labels[i] for i in cpos],
        title=f"{p.title} · tokens {rpos[0]}–{rpos[-1]} ← {cpos[0]}–{cpos[-1]}",
        zmin=rng[0],
        zmax=rng[1],
        positions=rpos,
        col_positions=cpos,
        font_size=font_size,
        colorbar_title=data.unit(p.key, view.values),
        masked=masked,
        present=present,
        width=width,
        focus=focus,
    )
    zoom.layout.meta = {**(zoom.layout.meta or {}), "window": [rpos[0], rpos[-1] + 1, cpos[0], cpos[-1] + 1]}
    st.plotly_chart(
        themed(zoom),
        key=f"zoom_{p.key}",
        config=viz.plotly_config(filename=f"normviz_zoom_{p.key}", fmt=image_format()),
        width="content" if zoom.layout.width else "stretch",
    )


def _focus_rows(panels, focus: int, labels: list[str], font_size: int) -> None:
    """The focus token's row in every panel, over every shown token (full resolution)."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for p in panels:
        if focus not in set(p.keep.tolist()):
            continue
        i = long_maps.shown_index(p.keep, focus)
        fig.add_trace(
            go.Scatter(
                x=p.keep,
                y=p.row(i),
                mode="lines",
                name=plotly_text(title(p.key)),
                text=[labels[j] for j in p.keep],
                hovertemplate="%{text} [%{x}]: %{y:.4g}<extra></extra>",
            )
        )
    fig.update_layout(
        title=dict(
            text=plotly_text(f"Row of “{labels[focus]}” [{focus}]: how much each token contributes to it"),
            font=dict(size=font_size + 2),
        ),
        xaxis_title="contributing token j (position)",
        yaxis_title="value (as in the panels)",
        height=360,
        font=dict(size=font_size),
        meta=dict(normviz="focus_rows", focus=int(focus)),
    )
    st.plotly_chart(
        themed(fig), key="focus_rows", config=viz.plotly_config(filename="normviz_focus_row", fmt=image_format())
    )


__all__ = ["applies", "draw"]
