"""The Translate page's regions: the inputs (source, target, model, examples), the pickers (layer, head, method,
setting), the weights and norms side by side, the alignment (against a gold alignment when given) and the
export row. The view and its helpers: :mod:`.translate`; alignments from :mod:`normviz.align`."""

from __future__ import annotations

import pandas as pd
import streamlit as st

import normviz

from ... import viz
from ...align import cross_matrix, format_pharaoh, parse_line
from ...align.formats import AlignmentFormatError
from ...viz.alignment import alignment_figure
from ..kit import data
from ..kit import st_parts as ui
from ..kit.settings import settings
from .translate import MAX_GOLD_CHARS, METHODS, SETTINGS, maps_npz

VIEW = "_normviz_translate_view"
METHOD_NAMES = {"norm": "norms ‖α f(e)‖", "weight": "weights α"}
SETTING_HELP = (
    "AWI: each target word is read at the row where it is fed to the decoder (the paper's better "
    "setting). AWO: at the row that predicts it."
)


def save_view(view) -> None:
    ui.save_view(view, VIEW)


def draw_inputs(view, examples: list) -> tuple:
    """Source, target, model and the examples; stage mode: one compact bar. Gives (the bar or None, where the
    other controls go)."""
    limit = settings().max_text_chars

    def use_example():
        k = st.session_state.get("tr_example")
        if k is not None:
            st.session_state["tr_src"], st.session_state["tr_tgt"], st.session_state["tr_gold"] = examples[k]

    ui.seed("tr_gold", view.gold)
    bar = None
    if view.present:
        bar = st.columns([4, 3, 2, 3, 2, 1.4], vertical_alignment="bottom")  # ⋯ whole at 1280 px
        c1, c2, c3 = bar[:3]
        more = bar[5].popover("⋯", help="More controls: examples, alignment method and setting")
    else:
        c1, c2, c3 = st.columns([4, 4, 2])
        more = st.container()
    with c1:
        view.src = ui.text_box("Source", "tr_src", view.src, max_chars=limit)
    with c2:
        view.tgt = ui.text_box(
            "Target (empty: generated)" if view.present else "Target (optional: empty = the model translates)",
            "tr_tgt",
            view.tgt,
            max_chars=limit,
        )
    with c3:
        view.model = ui.text_box(
            "Model" if view.present else "Model (encoder–decoder)",
            "tr_model",
            view.model,
            max_chars=256,
            help="toy-mt is embedded (a tiny Marian trained on a toy language pair whose "
            "true alignment is known); a Marian, BART or T5 directory or Hub id also works.",
        )
    if examples:
        more.selectbox(
            "Examples (toy-mt test set, with gold alignment)",
            range(len(examples)),
            index=None,
            key="tr_example",
            on_change=use_example,
            format_func=lambda i: examples[i][0],
            placeholder="Pick an example…",
        )
    return bar, more


def head_name(head: int, present: bool) -> str:
    """The head box's option: on stage (a narrow box in the top row) "all heads", which "(layer view)" cut to
    "all heads (layer vie" at 1280 and 1920 px; else "all heads (layer view)"."""
    if head >= 0:
        return f"head {head}"
    return "all heads" if present else "all heads (layer view)"


def draw_pickers(view, a, bar, more) -> None:
    """Layer, head, the alignment's method and setting; stage mode: ←/→ layers, ↑/↓ heads, Esc leaves."""
    L, H = a["cross_attention"].shape[:2]  # the decoder's cross blocks
    ui.seed("tr_layer", L - 1 if view.layer is None else min(view.layer, L - 1))
    st.session_state["tr_layer"] = min(max(int(st.session_state["tr_layer"]), 0), L - 1)
    head_opts = [-1] + list(range(H))
    ui.seed("tr_head", -1 if view.head is None or view.head >= H else view.head)
    if st.session_state["tr_head"] not in head_opts:
        st.session_state["tr_head"] = -1
    ui.seed("tr_method", view.method)
    ui.seed("tr_setting", view.setting)
    p1, p2, p3, p4 = (bar[3], bar[4], more, more) if view.present else st.columns([4, 3, 2, 2])
    with p1:
        view.layer = st.slider("Layer", 0, L - 1, key="tr_layer") if L > 1 else 0
    with p2:
        h = st.selectbox("Head", head_opts, key="tr_head", format_func=lambda x: head_name(x, view.present))
        view.head = None if h < 0 else h
    with p3:
        view.method = st.radio("Alignment from", METHODS, key="tr_method", format_func=METHOD_NAMES.get)
    with p4:
        view.setting = st.radio("Setting", SETTINGS, key="tr_setting", horizontal=True, help=SETTING_HELP)
    save_view(view)
    if view.present:
        ui.keyboard("tr_layer", list(range(L)), "tr_head", head_opts, leave=lambda: ui.leave_stage(VIEW, "tr_present"))


def where(view) -> str:
    return f"layer {view.layer}, " + ("all heads" if view.head is None else f"head {view.head}")


def draw_panels(view, a, lm, fs: int) -> dict:
    """Cross-attention weights and norms side by side at the layer (and head). Gives the matrices shown."""
    rows = data.unique_labels(list(a.tgt_tokens))  # viz.heatmap escapes them (viz.labels.plotly_text)
    cols = data.unique_labels(list(a.src_tokens))
    titles = {
        "weight": "Cross-attention weights α" + (" (mean over heads)" if view.head is None else ""),
        "norm": "Norms ‖α f(e)‖" + (" (heads summed as vectors)" if view.head is None else ""),
    }
    shown = {}
    width = ui.panel_width(2, view.present)  # sized to the column (and in stage mode to the screen's height)
    for col, method in zip(st.columns(2, gap="medium"), ("weight", "norm")):
        shown[method] = cross_matrix(a, method, view.layer, view.head)
        with col:
            fig = viz.heatmap(
                shown[method],
                rows,
                cols,
                title=f"{titles[method]} · {where(view)}",
                font_size=fs,
                colorbar_title="value",
                width=width,
                present=view.present,
            )
            ui.context_line(fig, lm.name, view.src, fs)
            ui.chart(fig, key=f"tr_panel_{method}", filename=f"translate_{method}_layer{view.layer}")
    start = str(a.tgt_tokens[0]) if len(a.tgt_tokens) else "the start token"
    if not view.tgt.strip() and view.present:
        st.caption(ui.plain(f"Generated translation: {a.target_text}"))
    st.caption(
        ui.plain(
            f"Row r is fed the r-th decoder input token and predicts the next one: row 0 is {start}, the "
            f"token {lm.name}'s decoder starts from (its decoder_start_token_id; Marian models start "
            "from their padding token), so it predicts the first target word. Per-panel colour scales "
            "(weights and norms have different units).",
            None,
        )
    )
    return shown


def draw_alignment(view, sa, fs: int):
    """The alignment the chosen maps imply, the gold alignment box, and the AER against it. Gives the links."""
    links = sa.links(view.method, view.setting, view.layer, view.head)
    gold_text = st.text_area(
        "Gold alignment (optional): Pharaoh links, 0-based source-target words, i-j sure, i?j possible",
        key="tr_gold",
        max_chars=MAX_GOLD_CHARS,
        height=70,
    )
    view.gold = gold_text
    save_view(view)
    sure = possible = None
    if gold_text.strip():
        try:
            sure, possible = parse_line(" ".join(gold_text.split()), "pharaoh")
        except AlignmentFormatError as exc:
            ui.say("error", f"Gold alignment not read: {exc}.")
        else:
            bad = sa.gold_problem(sure, possible)
            if bad:
                ui.say("error", f"Gold alignment not used: {bad}.")
                sure = possible = None
    fig = alignment_figure(
        sa.src_words,
        sa.tgt_words,
        links,
        sure=sure,
        possible=possible,
        font_size=fs,
        width_px=ui.main_width(),
        title=f"Alignment from {METHOD_NAMES[view.method]}, {view.setting}, {where(view)}",
    )
    st.plotly_chart(ui.themed(fig), key="tr_alignment", config={"displaylogo": False})
    st.caption(
        "Each target word is linked to the source word with the largest score (subword scores summed over "
        "a source word, averaged over a target word); no link when the source end-of-sentence token wins."
    )
    if sure is not None:
        m1, m2 = st.columns(2)
        m1.metric(
            f"AER, {METHOD_NAMES['weight']} ({view.setting}, {where(view)})",
            f"{normviz.aer(sa.links('weight', view.setting, view.layer, view.head), sure, possible):.1%}",
        )
        m2.metric(
            f"AER, {METHOD_NAMES['norm']} ({view.setting}, {where(view)})",
            f"{normviz.aer(sa.links('norm', view.setting, view.layer, view.head), sure, possible):.1%}",
        )
        table = pd.DataFrame(sa.layer_aer(sure, possible)).set_index("layer")
        st.caption(
            "AER of this sentence per layer (layer views; lower is better). The corpus command: "
            "python -m normviz align --model M --src FILE --tgt FILE --gold FILE."
        )
        st.dataframe((table * 100).round(1))
    return links


def draw_export(view, a, links, shown: dict) -> None:
    """The alignment (Pharaoh) and the maps shown (NPZ)."""
    e1, e2, _ = st.columns([2, 2, 3])
    stem = f"normviz_translate_L{view.layer}_" + ("all" if view.head is None else f"H{view.head}")
    with e1:
        st.download_button(
            "Alignment (Pharaoh)", format_pharaoh(links) + "\n", file_name=stem + ".align.txt", mime="text/plain"
        )
    with e2:
        st.download_button(
            "Maps shown (NPZ)",
            maps_npz(shown, list(a.src_tokens), list(a.tgt_tokens)),
            file_name=stem + ".npz",
            mime="application/octet-stream",
        )
