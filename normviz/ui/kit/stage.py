"""Stage mode (``?present=1``, the sidebar's Stage mode toggle): what a page needs on a projector.

The keyboard (←/→ layer, ↑/↓ head, Space plays the layers, f focuses the hovered token, Esc leaves stage mode;
``components/stage_keys.js``) moves the page's own
controls, so the URL, the instant switch and every panel follow as if the visitor had used them; every panel
names its model and text (:func:`context_line`), so a screenshot explains itself.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from . import components

KEYS_WIDGET = "nv_stage_keys"


def move(key: str, options: list, step: int) -> None:
    """Move widget ``key`` ``step`` places along ``options`` (clamped at the ends)."""
    ss = st.session_state
    if key not in ss or not options:
        return
    i = options.index(ss[key]) if ss[key] in options else 0
    ss[key] = options[min(max(i + step, 0), len(options) - 1)]


def _on_key(
    layer_key: str, layers: list, head_key: str | None, heads: list, leave, on_step=None, focus_key: str | None = None
) -> None:
    on_key(
        (st.session_state.get(KEYS_WIDGET) or {}).get("key"),
        layer_key,
        layers,
        head_key,
        heads,
        leave,
        on_step,
        focus_key,
    )


def on_key(
    pressed,
    layer_key: str,
    layers: list,
    head_key: str | None,
    heads: list,
    leave,
    on_step=None,
    focus_key: str | None = None,
) -> None:
    """What the script's press ``pressed`` does: 'layer±', 'layer0' (Space at the last layer: play from the
    first), 'head±', 'next'/'prev', 'leave', 'focus:<position>' / 'focus:none' (``focus_key``: the page's focus
    widget; a position it does not offer, or the focused one again, clears the focus)."""
    ss = st.session_state
    if pressed in ("next", "prev") and on_step is not None:
        on_step(1 if pressed == "next" else -1)
    if pressed in ("layer-", "layer+"):
        move(layer_key, layers, -1 if pressed == "layer-" else 1)
    elif pressed == "layer0" and layers and layer_key in ss:
        ss[layer_key] = layers[0]
    elif pressed in ("head-", "head+") and head_key is not None:
        move(head_key, heads, -1 if pressed == "head-" else 1)
    elif pressed == "leave":
        leave()
    elif isinstance(pressed, str) and pressed.startswith("focus:") and focus_key is not None:
        tail = pressed[len("focus:") :]
        token = int(tail) if tail.isdigit() else None
        ss[focus_key] = None if token is None or ss.get(focus_key) == token else token


def keyboard(
    layer_key: str, layers: list, head_key: str | None, heads: list, leave, on_step=None, focus_key: str | None = None
) -> None:
    """Arrow keys, Space, f and Esc for this page: ``layer_key``/``head_key`` are the page's layer and head
    widgets (their ``layers``/``heads`` options in order), ``leave()`` turns stage mode off (from a callback:
    before the page's widgets are drawn); ``on_step(+1 / -1)`` walks a talk's steps (PageDown/PageUp, n/p);
    ``focus_key``: the focus widget that ``f`` sets to the hovered token. Space plays the layers in the browser
    (one ``layer+`` a second up to the last), so the script gets the layer's index and the count. Where
    ``layer_key`` is a slider of ``layers`` in order (Explore, Translate), ←/→ press the slider's own keys in the
    browser (the instant switch draws the layer at once; no round trip first); elsewhere they come here."""
    current = st.session_state.get(layer_key)
    index = layers.index(current) if current in layers else 0
    try:
        components.component("normviz_stage_keys")(
            key=KEYS_WIDGET,
            data={"layer": index, "layers": len(layers), "layer_key": layer_key},
            on_key_change=lambda: _on_key(layer_key, layers, head_key, heads, leave, on_step, focus_key),
        )
    except Exception:  # no components v2 (older Streamlit): the page's own controls still work
        pass


def escape_key(present: bool) -> None:
    """Stage mode's Esc (and nothing else) on a page without layer and head keys (Overview, Learn, Trust,
    Corpus): docs/app.md promises Esc leaves stage mode on every page. The arrows and Space find no layer control
    (``layers`` is empty) and do nothing."""
    if present:
        keyboard("_normviz_no_layer", [], None, [], leave=leave_stage)


def leave_stage(view_key: str = "_normviz_view", toggle: str = "w_present") -> None:
    """Turn stage mode off for the view kept under ``view_key`` and its sidebar ``toggle`` (a key callback)."""
    ss = st.session_state
    ss[toggle] = False
    if view_key in ss:
        ss[view_key].present = False


def context_text(model: str, text: str, limit: int = 60, sep: str = " · ") -> str:
    """'minilm · “The cat sat on the…”' for a figure, as typed: the viz builders escape what they are given
    (:func:`normviz.viz.labels.plotly_text`, once)."""
    words = " ".join(str(text).split())
    cut = words if len(words) <= limit else words[: limit - 1].rstrip() + "…"
    return f"{model}{sep}“{cut}”"


def context_line(fig, model: str, text: str, font_size: int) -> None:
    """Name the model and the text (cut) under a panel's title: an exported PNG says what it shows. It is the
    title's subtitle, so it starts where the title does, at the figure's left edge: an annotation starts at the
    plot area's left, which plotly moves right by the longest tick label, and a long line ran past the figure's
    right edge (gemma3's "…because it was tire"). Shown literally (plotly would read ``<b>``, ``<a>`` … as markup)."""
    from normviz.viz.labels import plotly_text

    line = plotly_text(context_text(model, text))  # added here: escaped here, once
    size = max(12, font_size - 1)  # it may be the only name of a compared model: read from a seat too
    title = fig.layout.title
    if not title.text:  # no title to sit under: the line is the title, at the figure's top left
        fig.update_layout(title=dict(text=line, font=dict(size=size), x=0.0, xanchor="left"))
        return
    # no colour of its own: the theme's text colour (dark on light, light on dark); the title moves up by a line
    fig.update_layout(
        title=dict(
            subtitle=dict(text=line, font=dict(size=size)), pad=dict(b=(title.pad.b or 0) + round(1.6 * size) + 6)
        )
    )


def grid_clicks(charts: dict[str, int], cell: int) -> dict | None:
    """The square of Overview's grids clicked in the browser, as {"layer", "head" (None for a layer-level map),
    "chart"}, once (on the rerun the click causes), else None. ``charts``: chart key → heads shown; ``cell``: a
    square's side + 1 (the gap)."""
    try:
        result = components.component("normviz_grid_click")(
            key="nv_grid_click",
            data={"charts": list(charts), "cell": int(cell), "heads": dict(charts)},
            on_cell_change=lambda: None,
        )
    except Exception:  # no components v2: the zoom's layer and head boxes still open any head
        return None
    got = getattr(result, "cell", None)
    if not isinstance(got, dict) or not isinstance(got.get("layer"), int):
        return None
    head = got.get("head")
    return {"layer": got["layer"], "head": head if isinstance(head, int) else None, "chart": got.get("chart")}


def row_clicks(chart: str, key: str = "nv_row_click") -> int | None:
    """The row of the heatmap ``chart`` (its chart key) whose cell was clicked in the browser, once (on the
    rerun the click causes), else None: the Why page's Continuation view opens that step."""
    try:
        result = components.component("normviz_row_click")(key=key, data={"chart": chart}, on_row_change=lambda: None)
    except Exception:  # no components v2: the step picker above the heatmap still opens any step
        return None
    got = getattr(result, "row", None)
    if not isinstance(got, dict) or got.get("chart") != chart or not isinstance(got.get("row"), int):
        return None
    return int(got["row"])


# --- a talk's steps (bookmarks, normviz.ui.kit.steps): saved views walked like slides ---------------------------


def go_to_step(index: int, groups: dict[str, list[str]]) -> None:
    """Show step ``index`` of the view's steps: its layer, head and maps go into Explore's own widgets (a
    callback: before they are drawn). ``groups``: the map picker's groups (data.grouped of the offered keys)."""
    from .controls import ALL_HEADS, HEAD_KEY, LAYER_KEY
    from .pickers import PILL_KEYS
    from .session_view import VIEW

    ss = st.session_state
    view = ss.get(VIEW)
    if view is None or not 0 <= index < len(view.steps):
        return
    step = view.steps[index]
    ss[LAYER_KEY] = step.layer
    ss[HEAD_KEY] = ALL_HEADS if step.head is None else step.head
    for group, key in PILL_KEYS.items():
        ss[key] = [k for k in step.maps if k in groups.get(group, ())]
    offered = {k for keys in groups.values() for k in keys}
    kept = tuple(k for k in step.maps if k in offered)
    view.layer, view.head, view.maps = step.layer, step.head, kept
    ss["_normviz_step"] = index
    ss[STEP_NOTE] = (index, left_out_note(index, step, view.model, offered))


STEP_NOTE = "_normviz_step_note"  # (step index, the note on its maps left out, or None)


def left_out_note(index: int, step, model: str, offered) -> str | None:
    """The note for a step whose maps this model does not offer (never dropped silently): which were left
    out and why (:func:`normviz.ui.kit.keys.why_not_offered`), and what is shown instead; None if none was."""
    from .keys import why_not_offered

    dropped = [k for k in step.maps if k not in offered]
    if not dropped:
        return None
    kept = [k for k in step.maps if k in offered]
    reasons = "; ".join(f"{k}: {why_not_offered(k)}" for k in dropped)
    shown = f"Shown: {', '.join(kept)}." if kept else "None of its maps is shown: choose maps in the sidebar."
    return (
        f"Step {index + 1} ({step.name}) names {'a map' if len(dropped) == 1 else 'maps'} that "
        f"{model or 'this model'} does not offer, left out — {reasons}. {shown}"
    )


def step_note() -> None:
    """The note of the step on screen, if its maps were left out (a warning above the panels, on stage too)."""
    from .messages import say

    ss = st.session_state
    index, note = ss.get(STEP_NOTE) or (None, None)
    if note and index == ss.get("_normviz_step"):
        say("warning", note)


def walk_steps(delta: int, groups: dict[str, list[str]]) -> None:
    """The next (``delta`` = 1) or previous (-1) step."""
    from .session_view import VIEW
    from .steps import following

    view = st.session_state.get(VIEW)
    index = following(view.steps if view is not None else (), st.session_state.get("_normviz_step"), delta)
    if index is not None:
        go_to_step(index, groups)


def _save_step() -> None:
    from .session_view import VIEW
    from .steps import MAX_STEPS, Step, clean_name

    ss = st.session_state
    view = ss.get(VIEW)
    if view is None or len(view.steps) >= MAX_STEPS:
        return
    name = clean_name(ss.get("w_step_name") or f"step {len(view.steps) + 1}")
    view.steps = tuple(view.steps) + (Step(name, int(view.layer), view.head, tuple(view.maps)),)
    ss["w_step_name"] = ""
    ss["_normviz_step"] = len(view.steps) - 1


def _clear_steps() -> None:
    from .session_view import VIEW

    if VIEW in st.session_state:
        st.session_state[VIEW].steps = ()
    st.session_state.pop("_normviz_step", None)
    st.session_state.pop(STEP_NOTE, None)


def talk_link(view, base: str) -> str:
    """``base`` (the page's address) with ``view``'s query, every separator of the steps percent-encoded
    (``+`` as ``%2B``, ``;`` as ``%3B``, spaces as ``%20``): a mail client or chat that rewrites a bare ``+``
    cannot lose a step. ``ViewState.from_query(parse_qs(query))`` gives the view back."""
    from urllib.parse import quote, urlencode

    query = urlencode(view.to_query(), quote_via=quote, safe="")
    return base.split("?", 1)[0].split("#", 1)[0] + ("?" + query if query else "")


def page_address() -> str:
    """The address of the page in the visitor's browser (without its query), or "./" where unknown (AppTest)."""
    try:
        url = st.context.url
    except Exception:
        url = None
    return url.split("?", 1)[0] if isinstance(url, str) and url.startswith("http") else "./"


def step_text(view, current: int | None) -> str | None:
    """'Step 2 of 5 · Deep layers' for the step on screen, '5 steps · PageDown shows the first' before one is
    chosen; None without steps."""
    n = len(view.steps)
    if not n:
        return None
    if current is None or not 0 <= current < n:
        return f"{n} step{'s' if n > 1 else ''} · PageDown (or n) shows the first"
    return f"Step {current + 1} of {n} · {view.steps[current].name}"


def step_indicator(view) -> None:
    """The step on screen, named and numbered (stage mode, above the panels)."""
    from .safe import plain

    text = step_text(view, st.session_state.get("_normviz_step"))
    if text is not None:
        st.markdown(
            f"**{plain(text, None)}**",
            help="PageDown / PageUp (a presenter's remote) or n / p walk the talk's steps; the sidebar lists them.",
        )


def step_controls(view, groups: dict[str, list[str]]):
    """The sidebar's steps: save the current view (layer, head, maps) under a name, go to a step, clear them.
    They travel in the URL (``steps=``), so the talk is one link. Returns the slot of the talk link
    (:func:`show_talk_link`)."""
    st.text_input("Name this view", key="w_step_name", max_chars=40, placeholder=f"step {len(view.steps) + 1}")
    st.button("Save the view as a step", key="w_step_save", on_click=_save_step, disabled=len(view.steps) >= 30)
    if view.steps:
        st.radio(
            "Go to step",
            list(range(len(view.steps))),
            key="w_step_go",
            index=None,
            format_func=lambda i: f"{i + 1}. {view.steps[i].name}",
            on_change=lambda: go_to_step(st.session_state["w_step_go"], groups),
        )
        st.button("Clear the steps", key="w_step_clear", on_click=_clear_steps)
        st.caption("In stage mode PageDown / PageUp (a presenter's remote) or n / p walk through them.")
    return st.empty()  # the talk link, written by show_talk_link once the page's controls hold the view


def show_talk_link(slot, view) -> None:
    """The talk link (this view and its steps, safely encoded) in the sidebar ``slot`` that
    :func:`step_controls` returned; ``st.code`` gives it a copy button."""
    if slot is None or not view.steps:
        return
    with slot.container():
        st.caption("Copy the talk link (the icon at its right): this view and its steps, every separator encoded.")
        # a talk is given on stage: the link opens in stage mode (present=1) whatever the page shows now
        st.code(talk_link(replace(view, present=True), page_address()), language=None, wrap_lines=True)
