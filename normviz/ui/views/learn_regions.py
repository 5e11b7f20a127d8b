"""The Learn page's regions: why a weight is not a contribution (on the visitor's sentence), every map on a
3-token text (a tab per map, with the Why and Trust lessons), and the Why page's answers on that text. The lessons'
words and numbers: :mod:`.learn`."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from ... import viz
from ...core.errors import NormvizError
from ...core.fx import attention_row_scale
from ...methods import keyspace, registry
from ...session.session import Session
from ..kit import data
from ..kit import st_parts as ui
from . import frame, learn, learn_circuit, trust


def why_weight_is_not_contribution(view, lm, fs, text_keys: tuple[str, ...]) -> None:
    """α, ‖f(x)‖ and their product ‖α f(x)‖ for one row of one head, on the visitor's own sentence."""
    st.subheader("Why a weight is not a contribution — on your sentence")
    view.text = ui.text_box(
        "Your sentence (the same text as on Explore)", "w_text", view.text, max_chars=ui.settings().max_text_chars
    )
    if ui.follow_text(text_keys, view.model, view.text, view.pair):
        view.focus = None  # the old text's row is not this text's
    if not view.text.strip():
        st.info("Type a sentence to step through it.")
        return
    session = ui.session_for(lm, view.text, view.pair)
    if session is None:
        return
    a = ui.get_maps(session, ["attention", "norm"])
    if a is None or "attention" not in a or "norm" not in a:
        return
    labels = data.unique_labels(list(a.labels))
    L, H, n = lm.n_layers, lm.n_heads, a.n_tokens
    ui.seed_index("w_why_layer", view.layer % L if -L <= view.layer < 0 else view.layer, L, "layer")
    ui.seed("w_why_head", view.head if view.head is not None and 0 <= view.head < H else 0)
    if st.session_state["w_why_head"] not in range(H):
        st.session_state["w_why_head"] = 0
    default_row = view.focus if view.focus is not None and 0 <= view.focus < n else min(2, n - 1)
    ui.seed("w_why_row", default_row)
    if st.session_state["w_why_row"] not in range(n):
        st.session_state["w_why_row"] = default_row
    c1, c2, c3 = st.columns([3, 2, 3])
    with c1:
        layer = st.slider("Layer", 0, L - 1, key="w_why_layer")
    with c2:
        head = st.selectbox("Head", list(range(H)), key="w_why_head", format_func=lambda h: f"head {h}")
    with c3:
        i = st.selectbox(
            "Receiving token i (a row)", list(range(n)), key="w_why_row", format_func=lambda k: f"{labels[k]} [{k}]"
        )
    norms = ui.fx_norms(session, layer)
    if norms is None:
        return
    # a decoder's row i sees tokens j ≤ i only: the masked future tokens (α = 0) are left out, not ranked
    seen = list(range(i + 1)) if lm.is_causal else list(range(n))
    scale = attention_row_scale(session, layer)  # Gemma: the map carries 1/s_i of the norm after attention
    w = learn.why_rows(
        a.map("attention", layer, head)[i][seen],
        norms[head][seen],
        a.map("norm", layer, head)[i][seen],
        1.0 if scale is None else float(scale[i]),
    )
    _draw_row(view, lm, w, labels, seen, layer, head, i, n, fs)


def _draw_row(
    view, lm, w: dict, labels: list[str], seen: list[int], layer: int, head: int, i: int, n: int, fs: int
) -> None:
    """The row's table (α, ‖f‖, their product, the map), its two shares as bars, and what they show."""
    step3 = learn.product_step(w["row_scale"])
    rows = pd.DataFrame(learn.row_table(w, labels, seen))
    st.markdown(
        "**1.** Head "
        + str(head)
        + " of layer "
        + str(layer)
        + " gives token "
        + ui.lit(labels[i])
        + " a weight α_ij for every token j (the row sums to 1).  \n"
        "**2.** What it adds from j is α_ij times f(x_j), token j's vector transformed by the head; its "
        "length ‖f(x_j)‖ differs a lot from token to token.  \n" + step3[0]
    )
    left, right = st.columns([1, 1], gap="medium")
    with left:
        ui.table(rows, view.present, hide_index=True, width="stretch")
    with right:
        # one chart, one title, the two shares as its two rows (two charts repeated the same title)
        fig = viz.bars(
            {"share of the weight α": w["share_alpha"], "share of the norm ‖α f(x)‖": w["share_norm"]},
            labels,
            [seen, seen],
            width=ui.panel_width(2, view.present),
            focus_label=f"{labels[i]} [{i}]",
            font_size=fs,
        )
        ui.chart(fig, key="why_bars", filename=f"normviz_why_L{layer}_H{head}")
    if lm.is_causal and i + 1 < n:
        st.caption(
            f"{lm.name} is a decoder: row {i} sees tokens 0 … {i} only, so the {n - i - 1} later tokens "
            "(masked, α = 0) are left out of the table and the ranks."
        )
    top_a, top_n = int(np.argmax(w["alpha"])), int(np.argmax(w["norm"]))
    if top_a != top_n:
        msg = (
            f"Here the largest weight goes to {labels[top_a]} (α = {w['alpha'][top_a]:.2f}), but its vector is "
            f"short (‖f‖ = {w['fx'][top_a]:.2f}): by norm it ranks {int(w['rank_norm'][top_a]) + 1}. "
            f"The largest contribution comes from {labels[top_n]} (α = {w['alpha'][top_n]:.2f}, "
            f"‖f‖ = {w['fx'][top_n]:.2f})."
        )
    else:
        msg = (
            f"Here weight and norm agree on the top token, {labels[top_a]}; look at the ranks below it, or try "
            "another head or row: heads that put their weight on [CLS]/[SEP]/BOS usually disagree."
        )
    st.info(ui.plain(msg, None))


def three_token_text(lm) -> str:
    for text in ("cats", "The cat sat", "Cats sleep", "I am here", "Hello world"):
        if Session(lm, text).n_tokens == 3:  # tokenises only; nothing runs until a map is asked for
            return text
    return "cats"


def draw_every_map(view, lm, fs) -> None:
    """Every map on a 3-token text: the text, layer and head, then a tab per map (and the Why and Trust tabs)."""
    st.subheader("Every map, on a 3-token text")
    ui.seed("w_learn_text", three_token_text(lm))
    c1, c2, c3 = st.columns([3, 3, 2])
    with c1:
        text = st.text_input(
            "Worked example text (3 tokens read best)", key="w_learn_text", max_chars=ui.settings().max_text_chars
        )
    frame.text(text, "The text is empty. Type a word or two.")
    session = frame.session(lm, text, "")
    every = registry.all_keys(lm.spec.placement, include_opt_in=True)  # the opt-in ones are cheap at 3 tokens
    a = frame.maps(session, every)
    labels = data.unique_labels(list(a.labels))
    with c2:
        layer = st.slider("Layer", 0, lm.n_layers - 1, 0, key="w_learn_layer")
    with c3:
        head = st.selectbox(
            "Head (per-head maps)", list(range(lm.n_heads)), key="w_learn_head", format_func=lambda h: f"head {h}"
        )
    st.caption(
        "Tokens: "
        + ui.plain(" · ".join(f"{lab} [{i}]" for i, lab in enumerate(labels)), None)
        + " — rows receive, columns "
        "contribute. Model: " + f"{ui.plain(lm.name, 80)} ({lm.spec.placement}-LN)."
    )
    if a.refused:  # maps this model does not offer: nobody asked for them, so a note, not an error box
        st.caption(
            ui.plain(
                f"Not shown for {lm.name}: " + "; ".join(f"{ui.title(k)} ({msg})" for k, msg in a.refused.items()), None
            )
        )
    keys = [k for k in every if k in a]
    titles = [keyspace.key_info(k).title for k in keys]
    default = keyspace.key_info(view.lesson).title if view.lesson in keys else None
    if view.lesson and view.lesson not in keys and view.lesson in registry.all_keys():
        ui.say("info", f"{view.lesson} does not apply to {lm.name} ({lm.spec.placement}-LN); showing the first map.")
    if view.lesson == learn.WHY_LESSON:
        default = learn.WHY_TAB
    elif view.lesson and view.lesson not in registry.all_keys() and not learn_circuit.opens(view.lesson):
        # a typo in a link: said, not ignored (?lesson=induction opens the circuit lesson above)
        ui.say("warning", learn.unknown_lesson(view.lesson, keys, titles[0] if titles else learn.WHY_TAB))
    tabs = st.tabs(titles + [learn.WHY_TAB, trust.TAB], default=default)
    with tabs[-2]:
        why_this_token(lm, session, fs)
    with tabs[-1]:
        st.markdown(trust.MEANING)
        ui.link_to_page(
            "app_pages/5_Trust.py", "Every attribution against the interventions, on your text: the Trust page ↗", {}
        )
    for tab, key in zip(tabs, keys):
        with tab:
            draw_map_tab(view, lm, a, key, labels, layer, head, fs)


def draw_map_tab(view, lm, a, key: str, labels: list[str], layer: int, head: int, fs: int) -> None:
    """One map's tab: its formula and words, its table and heatmap at the layer (and head), what it shows and
    hides, its papers."""
    info = keyspace.key_info(key)
    lesson = learn.LESSONS.get(key)

    def table(m: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(np.round(m, 4), index=[f"{lab} ←" for lab in labels], columns=labels)

    if lesson:
        st.latex(lesson.latex)
        st.markdown(lesson.what)
    else:
        st.markdown(info.description)
    st.caption(learn.caption(key))
    m = a.map(key, layer, head if info.per_head else None)
    where = f"layer {layer}" + (f", head {head}" if info.per_head else "")
    left, right = st.columns([3, 2])
    with left:
        st.markdown(f"**{info.title}, {where}:**")
        ui.table(table(m), view.present, width="content")
        ex = learn.worked_example(m)
        st.markdown(
            "Row sums: "
            + ui.plain(", ".join(f"{labels[i]} {v:.4f}" for i, v in enumerate(ex["row_sum"])), None)
            + "  \nShare of each row on the token itself (diagonal): "
            + ui.plain(", ".join(f"{labels[i]} {v:.1%}" for i, v in enumerate(ex["self_share"])), None)
        )
    with right:
        st.plotly_chart(
            ui.themed(viz.heatmap(m, labels, title=where, font_size=fs, height=340, causal=lm.is_causal)),
            key=f"learn_{key}",
        )
    if lesson:
        st.markdown(f"**Shows:** {lesson.shows}\n\n**Hides:** {lesson.hides}")
    if key == "norm" and "attention" in a:
        alpha = a.map("attention", layer, head)
        fx, spread = learn.value_norms_from(alpha, m)
        st.markdown(
            "Because α ≥ 0, ‖α f(x_j)‖ = α · ‖f(x_j)‖. Dividing this table by the attention table "
            "recovers "
            "‖f(x_j)‖ for each column: "
            + ui.plain(", ".join(f"{labels[j]} {v:.3f}" for j, v in enumerate(fx)), None)
            + f" (the same in every row up to {spread:.1e}, relative). A big weight on a token with a short "
            "vector moves little."
        )
    if key == "norm_layer" and "norm" in a:
        per_head_sum = a["norm"][layer].sum(0)
        ratio = np.divide(m, per_head_sum, out=np.zeros_like(m, dtype=float), where=per_head_sum > 0)
        st.markdown(
            "The sum over heads of each head's length, Σ_h ‖α^h f^h‖, is never smaller (triangle "
            "inequality); their ratio shows how much the heads cancel:"
        )
        ui.table(table(ratio), view.present, width="content")
    st.markdown("Papers: " + " · ".join(f"[{p.title}]({p.url})" for p in learn.papers_of(key)))


def why_this_token(lm, session, fs) -> None:
    """The Why page's three answers — direct logit attribution, the exact propagation, the routes — with their
    formulas and the numbers of this 3-token text."""
    from . import why as W

    for name, latex, words in learn.WHY_FORMULAS:
        st.markdown(f"**{name}**")
        st.latex(latex)
        st.markdown(words)
    why_not = W.has_head(lm)
    if why_not is not None or lm.spec.placement != "pre":
        st.info(
            f"The live example needs a pre-LN decoder with its LM head; {ui.plain(lm.name, 80)} is not one. Pick "
            "smollm2 in the sidebar."
        )
        return
    try:
        ex = learn.why_example(session)
    except NormvizError as exc:
        ui.say("info", str(exc))
        return
    st.markdown(ui.plain(f"On this text the model's top next token is {ex['token']!r}, logit {ex['total']:.4f}.", None))
    left, mid, right = st.columns([2, 2, 3])
    with left:
        st.dataframe(pd.DataFrame(ex["direct"]).round(4), hide_index=True, width="stretch")
        st.caption(f"Direct parts: Σ = {ex['direct_sum']:.4f} = the logit.")
    with mid:
        st.dataframe(pd.DataFrame(ex["sources"]).round(4), hide_index=True, width="stretch")
        st.caption(f"Sources: Σ = {ex['sources_sum']:.4f} = the logit.")
    with right:
        st.dataframe(pd.DataFrame(ex["edges"]), hide_index=True, width="stretch", height=300)
        st.caption(f"Routes: {len(ex['edges'])} edges above τ = 0.04, from the prediction backwards.")
    ui.link_to_page("app_pages/0_Why.py", "All of it on your own text: the Why page ↗", {})
