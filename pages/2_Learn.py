"""normviz · Learn: each map explained, with a worked 3-token example computed live."""
import numpy as np
import pandas as pd
import streamlit as st

import normviz

from normviz import viz
from normviz.methods import registry
from normviz.ui import data, learn
from normviz.ui import st_parts as ui

st.set_page_config(page_title="normviz · Learn", page_icon="🎓", layout="wide")
def page() -> None:
    view = ui.load_view()
    view = ui.sidebar(view)
    ui.apply_style(view)

    st.header("Learn: what each map measures")
    st.markdown(
        "A transformer layer mixes token vectors. **Attention weights** say where a head looks; the maps of "
        "Kobayashi et al. measure the **vectors** that actually move, through more and more of the layer: "
        "the attention heads, the residual connection, the layer normalisation, the feed-forward block. "
        "Every number below is computed now from the model in the sidebar, on a 3-token text.")
    lm = ui.load_model(view.model)
    if lm is None:
        st.stop()
    ui.show_device(lm)


    def three_token_text(lm) -> str:
        for text in ("cats", "The cat sat", "Cats sleep", "I am here", "Hello world"):
            if normviz.Session(lm, text).n_tokens == 3:  # tokenises only; nothing runs until a map is asked for
                return text
        return "cats"


    ui.seed("w_learn_text", three_token_text(lm))
    c1, c2, c3 = st.columns([3, 3, 2])
    with c1:
        text = st.text_input("Worked example text (3 tokens read best)", key="w_learn_text",
                             max_chars=ui.settings().max_text_chars)
    if not text.strip():
        st.error("The text is empty. Type a word or two.")
        st.stop()
    session = ui.session_for(lm, text, "")
    if session is None:
        st.stop()
    a = ui.get_maps(session, ui.default_keys(lm))
    if a is None:
        st.stop()
    labels = data.unique_labels(list(a.labels))
    with c2:
        layer = st.slider("Layer", 0, lm.n_layers - 1, 0, key="w_learn_layer")
    with c3:
        head = st.selectbox("Head (per-head maps)", list(range(lm.n_heads)), key="w_learn_head",
                            format_func=lambda h: f"head {h}")
    st.caption("Tokens: " + ui.plain(' · '.join(f'{lab} [{i}]' for i, lab in enumerate(labels)), None)
               + " — rows receive, columns "
               "contribute. Model: " + f"{ui.plain(lm.name, 80)} ({lm.spec.placement}-LN).")


    def table(m: np.ndarray) -> pd.DataFrame:
        return pd.DataFrame(np.round(m, 4), index=[f"{lab} ←" for lab in labels], columns=labels)


    def links(key: str) -> str:
        return " · ".join(f"[{p.title}]({p.url})" for p in learn.papers_of(key))


    for k, msg in a.refused.items():
        ui.say("error", f"{ui.title(k)}: {msg}")
    keys = [k for k in a.keys()]
    tabs = st.tabs([registry.key_info(k).title for k in keys])
    for tab, key in zip(tabs, keys):
        info = registry.key_info(key)
        lesson = learn.LESSONS.get(key)
        with tab:
            if lesson:
                st.latex(lesson.latex)
                st.markdown(lesson.what)
            else:
                st.markdown(info.description)
            m = a.map(key, layer, head if info.per_head else None)
            where = f"layer {layer}" + (f", head {head}" if info.per_head else "")
            left, right = st.columns([3, 2])
            with left:
                st.markdown(f"**{info.title}, {where}:**")
                st.dataframe(table(m), width="content")
                ex = learn.worked_example(m)
                st.markdown("Row sums: " + ui.plain(", ".join(f"{labels[i]} {v:.4f}" for i, v in enumerate(ex["row_sum"])), None)
                            + "  \nShare of each row on the token itself (diagonal): "
                            + ui.plain(", ".join(f"{labels[i]} {v:.1%}" for i, v in enumerate(ex["self_share"])), None))
            with right:
                st.plotly_chart(viz.heatmap(m, labels, title=where, font_size=ui.font_size(view), height=340),
                                key=f"learn_{key}")
            if lesson:
                st.markdown(f"**Shows:** {lesson.shows}\n\n**Hides:** {lesson.hides}")
            if key == "norm" and "attention" in a:
                alpha = a.map("attention", layer, head)
                fx, spread = learn.value_norms_from(alpha, m)
                st.markdown(
                    "Because α ≥ 0, ‖α f(x_j)‖ = α · ‖f(x_j)‖. Dividing this table by the attention table recovers "
                    "‖f(x_j)‖ for each column: " + ui.plain(", ".join(f"{labels[j]} {v:.3f}" for j, v in enumerate(fx)), None)
                    + f" (the same in every row up to {spread:.1e}, relative). A big weight on a token with a short "
                      "vector moves little.")
            if key == "norm_layer" and "norm" in a:
                per_head_sum = a["norm"][layer].sum(0)
                ratio = np.divide(m, per_head_sum, out=np.zeros_like(m, dtype=float), where=per_head_sum > 0)
                st.markdown("The sum over heads of each head's length, Σ_h ‖α^h f^h‖, is never smaller (triangle "
                            "inequality); their ratio shows how much the heads cancel:")
                st.dataframe(table(ratio), width="content")
            st.markdown("Papers: " + links(key))


ui.run_page(page)
