"""Explore's controls, a function per screen region (the page composes them, :mod:`.explore_panels` draws the
maps): the text row, the sidebar (which maps, how they read, what goes beside them), the control row (layer,
head, view, threshold), the focus token, and the notes under the panels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from ...viz.labels import ordinal
from ..kit import controls, data
from ..kit import st_parts as ui
from ..kit.state import COMPARE_MODES, DEFAULT_MAPS

NONE = "(none)"
FOCUS_PILLS = 24  # longer texts pick the focus token in a searchable select
UPLOAD_NOTES = "_normviz_upload_notes"


@dataclass
class Layout:
    """Where the controls go: stage mode's one compact bar (text, layer, head, focus) and its ⋯ popover (the
    rest); None on the normal page (rows of columns)."""

    bar: Any = None
    more: Any = None


def label(k: str) -> str:
    return k if k == NONE else ui.title(k)


def draw_text_row(view, examples: list[tuple[str, str]]) -> Layout:
    """The text, the second sentence, the examples and a file upload; stage mode: one compact bar."""

    def use_example():
        choice = st.session_state.get("w_example")
        if choice is not None:
            st.session_state["w_text"], st.session_state["w_pair"] = examples[choice]
            st.session_state["w_focus"] = None

    def use_file():
        up = st.session_state.get("w_upload")
        if up is None:
            return
        limit = ui.settings()
        text, notes = data.uploaded_text(up.name, up.getvalue(), int(limit.max_upload_mb * 2**20), limit.max_text_chars)
        st.session_state[UPLOAD_NOTES] = notes
        if text is not None:
            st.session_state["w_text"], st.session_state["w_pair"] = text, ""
            st.session_state["w_focus"] = None

    layout = Layout()
    if view.present:  # stage mode: one compact bar (text, layer, head, focus; the rest behind ⋯)
        bar = st.columns([5, 3, 2, 3, 1], vertical_alignment="bottom")
        c1 = bar[0]
        c2 = c3 = more = bar[4].popover("⋯", help="More controls: second sentence, examples, view, threshold")
        layout = Layout(bar, more)
    else:
        c1, c2, c3 = st.columns([5, 3, 2])
    with c1:
        view.text = ui.text_box(
            "Text (one or two sentences)", "w_text", view.text, max_chars=ui.settings().max_text_chars
        )
    with c2:
        view.pair = ui.text_box(
            "Second sentence (optional, a pair)", "w_pair", view.pair, max_chars=ui.settings().max_text_chars
        )
    with c3:
        st.selectbox(
            "Examples",
            range(len(examples)),
            index=None,
            key="w_example",
            on_change=use_example,
            format_func=lambda i: examples[i][0] + (" ‖ " + examples[i][1] if examples[i][1] else ""),
            placeholder="Pick an example…",
        )
    with layout.more if view.present else st.expander("A long text from a file (.txt)"):
        st.file_uploader(
            f"Text file (UTF-8, at most {ui.settings().max_upload_mb:g} MB): its text goes into the "
            f"text box, cut at {ui.settings().max_text_chars:,} characters and "
            f"{ui.settings().max_tokens} tokens",
            type=["txt", "md"],
            key="w_upload",
            on_change=use_file,
        )
    for note in st.session_state.pop(UPLOAD_NOTES, []):
        ui.say("warning", note)
    return layout


def follow_the_model(view, lm, available: list[str]) -> None:
    """The view's maps read for this model: a talk link opens on its first step; pre-LN models' ff_res for
    ff_res_ln; maps the model does not offer are named."""
    if view.steps and "_normviz_step" not in st.session_state:  # a talk link opens on its first step (its layer,
        ui.go_to_step(0, data.grouped(available))  # head and maps), not on the link's view until the first PageDown
    if "ff_res_ln" in view.maps and "ff_res_ln" not in available and "ff_res" in available:
        # pre-LN models have no norm after the FF: ff_res is already their whole layer
        view.maps = tuple(dict.fromkeys("ff_res" if k == "ff_res_ln" else k for k in view.maps))
        if "w_maps" in st.session_state:
            st.session_state["w_maps"] = list(
                dict.fromkeys("ff_res" if k == "ff_res_ln" else k for k in st.session_state["w_maps"])
            )
    unknown = [k for k in view.maps if k not in available]
    if unknown and not lm.note:  # a model without an architecture row: its one note (show_device) says why
        ui.say("warning", f"Not available for {lm.name}: {', '.join(unknown)}. Available maps: {', '.join(available)}.")


def draw_sidebar(view, available: list[str]):
    """The sidebar's regions: which maps and how they read, what goes beside them, the talk's steps. Gives (the
    talk link's slot, the maps grouped) for the page's step keys."""
    with st.sidebar:
        draw_map_options(view, available)
        draw_beside(view)
        st.header("Steps (a talk as one link)")
        groups = data.grouped(available)
        talk_slot = ui.step_controls(view, groups)
    return talk_slot, groups


def draw_map_options(view, available: list[str]) -> None:
    """Which maps, special tokens hidden, shared scales, values, the ‖f(x)‖ strip."""
    st.header("Maps")
    head_now = st.session_state.get(controls.HEAD_KEY, controls.ALL_HEADS if view.head is None else view.head)
    view.maps = ui.map_picker(view.maps, available, list(DEFAULT_MAPS), all_heads=head_now == controls.ALL_HEADS)
    ui.seed("w_hide", view.hide_special)
    view.hide_special = st.toggle(
        "Hide special tokens",
        key="w_hide",
        help="Drops [CLS], [SEP], <s>, BOS … and renormalises each row over the rest.",
    )
    ui.seed("w_shared", view.shared_scale)
    view.shared_scale = st.toggle("Shared colour scales", key="w_shared", help=data.SHARED_SCALE_HELP)
    ui.seed("w_values", view.values)
    view.values = st.radio(
        "Values",
        ["share", "raw"],
        key="w_values",
        horizontal=True,
        format_func=lambda v: "row shares" if v == "share" else "raw",
        help="Row shares: each row divided by its total, so maps with different units compare "
        "on one colour scale. Raw: the map's own numbers (weights, vector norms).",
    )
    ui.seed("w_fx", view.fx)
    view.fx = st.toggle(
        "‖f(x)‖ strip under norm panels",
        key="w_fx",
        help="The length of each token's transformed vector: ‖α f(x)‖ = α · ‖f(x)‖, so a "
        "long bar lets a small weight move a lot.",
    )


def draw_beside(view) -> None:
    """Beside the maps: the difference A − B, the layer player, a comparison, the chart downloads' format."""
    st.header("Beside the maps")
    shown_opts = list(view.maps)
    diff_a = view.diff[0] if len(view.diff) == 2 and view.diff[0] in shown_opts else NONE
    diff_b = view.diff[1] if len(view.diff) == 2 and view.diff[1] in shown_opts else NONE
    if view.diff and (diff_a == NONE or diff_b == NONE) and "w_diff_a" not in st.session_state:
        ui.say("warning", f"The link's diff={','.join(view.diff)} names maps that are not shown; no difference panel.")
    ui.seed("w_diff_a", diff_a)
    ui.seed("w_diff_b", diff_b)
    for k in ("w_diff_a", "w_diff_b"):
        if st.session_state[k] not in [NONE] + shown_opts:
            st.session_state[k] = NONE
    d1, d2 = st.columns(2)
    with d1:
        a_key = st.selectbox("Difference: A", [NONE] + shown_opts, key="w_diff_a", format_func=label)
    with d2:
        b_key = st.selectbox("minus B", [NONE] + shown_opts, key="w_diff_b", format_func=label)
    view.diff = (a_key, b_key) if NONE not in (a_key, b_key) and a_key != b_key else ()
    if NONE not in (a_key, b_key) and a_key == b_key:
        st.caption("A and B are the same map: pick two different ones.")
    if view.player and view.player not in shown_opts and "w_player" not in st.session_state:
        ui.say(
            "warning",
            f"The link's player={view.player} is not a shown map ({', '.join(shown_opts) or 'none'}); "
            "no layer player. Pick one under 'Beside the maps'.",
        )
    ui.seed("w_player", view.player if view.player in shown_opts else NONE)
    if st.session_state["w_player"] not in [NONE] + shown_opts:
        st.session_state["w_player"] = NONE
    p = st.selectbox(
        "Layer player: animate a map through the layers", [NONE] + shown_opts, key="w_player", format_func=label
    )
    view.player = "" if p == NONE else p
    ui.seed("w_compare", view.compare)
    view.compare = st.radio(
        "Compare side by side with",
        COMPARE_MODES,
        key="w_compare",
        horizontal=True,
        format_func=lambda c: {"none": "nothing", "text": "a 2nd text", "model": "a 2nd model"}[c],
    )
    if view.compare == "text":
        view.text_b = ui.text_box(
            "Second text",
            "w_text_b",
            view.text_b,
            max_chars=ui.settings().max_text_chars,
            placeholder="Same layer, head and maps",
        )
    elif view.compare == "model":
        view.model_b = ui.second_model_picker(view.model_b, view.model)
    st.radio(
        "Chart downloads (camera icon)",
        ["png", "svg"],
        key="w_img",
        horizontal=True,
        format_func=str.upper,
        help="SVG for papers and slides; PNG at twice the screen resolution.",
    )


def draw_control_row(view, lm, layout: Layout) -> list:
    """Where in the model and how to draw: layer, head, view (heatmap or lines), threshold. Gives the head
    options (the keyboard's in stage mode)."""
    L, H = lm.n_layers, lm.n_heads
    LAYER, HEAD, ALL = controls.LAYER_KEY, controls.HEAD_KEY, controls.ALL_HEADS  # watched by instant switching
    ui.seed_index(LAYER, view.layer % L if -L <= view.layer < 0 else view.layer, L, "layer")
    st.session_state[LAYER] = min(max(int(st.session_state[LAYER]), 0), L - 1)  # after a model change
    head_opts = [ALL] + list(range(H))
    if view.head is None:
        ui.seed(HEAD, ALL)
    ui.seed_index(HEAD, view.head, H, "head", fallback=ALL, fallback_text=controls.head_option(ALL))
    if st.session_state[HEAD] not in head_opts:
        st.session_state[HEAD] = ALL
    if view.present:
        cl, ch, cd, ct = layout.bar[1], layout.bar[2], layout.more, layout.more
    else:
        cl, ch, cd, ct = st.columns([4, 2, 2, 2])
    with cl:
        view.layer = st.slider("Layer", 0, L - 1, key=LAYER)
    with ch:
        h = st.selectbox(
            "Head" if view.present else "Head (per-head maps)",
            head_opts,
            key=HEAD,
            format_func=controls.head_option,
            help="Per-head maps (α, ‖α f(x)‖, effective α) of one head, or of all heads at once "
            "(α averaged; ‖α f(x)‖ of the heads' vectors summed). Layer-level maps ignore it.",
        )
        view.head = None if h == ALL else h
    with cd:
        ui.seed("w_draw", view.draw)
        view.draw = st.segmented_control(
            "View",
            ["heatmap", "lines"],
            key="w_draw",
            required=True,
            format_func=str.capitalize,
            help="Heatmap: a cell per token pair. Lines: the tokens in two columns, "
            "joined by lines as thick as the contribution (hover a token).",
        )
        view.draw = view.draw or "heatmap"
    with ct:
        ui.seed("w_threshold", view.threshold)
        view.threshold = st.slider(
            "Hide below",
            0.0,
            0.9,
            step=0.05,
            key="w_threshold",
            format="%.2f",
            help="Hides cells (and lines) smaller than this share of the panel's largest value.",
        )
    return head_opts


def draw_focus(view, positions: list[int], n_tokens: int, labels: list[str], layout: Layout) -> None:
    """A row of token buttons (a searchable select for long texts and on stage): one token focused in every
    panel."""
    ui.seed_index("w_focus", view.focus, n_tokens, "focus", fallback=None, fallback_text="no focus token")
    if st.session_state["w_focus"] not in positions:
        st.session_state["w_focus"] = None
    focus_help = "Its row and column are outlined in every panel; its row also as bars below."
    if view.present or len(positions) > FOCUS_PILLS:  # a searchable select: a row of 100 buttons fills the screen
        with layout.bar[3] if view.present else st.container():
            view.focus = st.selectbox(
                "Focus a token",
                [None] + positions,
                key="w_focus",
                help=focus_help,
                placeholder="no token" if view.present else "no token (type to search)",
                format_func=lambda i: "no token" if i is None else f"{labels[i]} [{i}]",
            )
    else:
        view.focus = st.pills(
            f"Focus a token ({focus_help[0].lower()}{focus_help[1:-1]})",
            positions,
            key="w_focus",
            format_func=lambda i: labels[i],
        )


def notes(view, a, keys: list[str], merged, labels: list[str], panels) -> list[str]:
    """The notes for under the panels; the special tokens hidden are said here, above them (an info box)."""
    out = [n for n in (data.all_heads_note(keys, view.head), merged) if n]
    if any("·" in lab for lab in labels):
        out.append(
            "A token that occurs again is marked ·2, ·3 … (its 2nd, 3rd occurrence); the hover shows its position."
        )
    if view.hide_special and a.special.any():
        hidden = ", ".join(sorted({a.labels[i] for i in range(a.n_tokens) if a.special[i]}))
        ui.say(
            "info",
            f"Special tokens hidden ({hidden}); each row is renormalised over the tokens that remain"
            + (", keeping its original total." if view.values == "raw" else "."),
        )
    if view.shared_scale and len({data.scale_group(p.key) for p in panels}) > 1:
        out.append(data.SCALE_NOTE)
    if view.values == "raw" and view.shared_scale and len(panels) > 1:
        out.append("Raw values of different maps have different units; per-panel scales may read better.")
    return out


def label_step_note(figures) -> str | None:
    """A long text's axes name every k-th token: said under the panels."""
    step = max((int((f.layout.meta or {}).get("label_step", 1)) for f in figures), default=1)
    if step > 1:
        return (
            f"A long text: the axes name every {ordinal(step)} token so that the labels stay readable; "
            "hover a cell for its two tokens (the focus buttons above list them all)."
        )
    return None
