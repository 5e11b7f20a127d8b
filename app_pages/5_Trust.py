"""normviz · Trust: which map to trust for this prediction — every attribution beside the ground truth by
intervention (attention knockout, head ablation), with rank agreement and erasure scores; over the shipped corpus
run, the ranking with confidence intervals. Numbers from normviz.trust (explain_text, shipped); this file draws."""

import streamlit as st

import normviz
from normviz.trust import explain_text
from normviz.trust.report import shipped, shipped_about
from normviz.ui.kit import st_parts as ui
from normviz.ui.kit.memo import memoised
from normviz.ui.views import frame
from normviz.ui.views import known_circuits as KC
from normviz.ui.views import trust as T
from normviz.viz import trust as vt
from normviz.viz.why import shown

ui.page_config("Trust", "✅")
TEXT_KEYS = ()  # no box here holds a position or a token of the text (ui.follow_text; tested for every page)


def page() -> None:
    view, fs = ui.start_page()
    ui.escape_key(view.present)  # Esc leaves stage mode (this page has no layer/head keys)
    st.subheader("Which map to trust? Attributions against interventions")
    view.text = ui.text_box(
        "Text (the prediction after its last token; an encoder: at [MASK], else [CLS])",
        "w_trust_text",
        view.text,
        max_chars=ui.settings().max_text_chars,
    )
    ui.follow_text(TEXT_KEYS, view.model, view.text)
    ui.save_view(view)
    lm = frame.model(view.model, named=True)
    frame.text(view.text, "The text is empty. Type a sentence; the page scores every attribution of its prediction.")
    session = frame.session(lm, view.text)
    c1, c2 = st.columns(2)
    heads = c1.checkbox("Also head ablation (L·H passes)", value=False, key="w_trust_heads")
    gradients = c2.checkbox(
        "Gradient baselines (input × gradient, integrated gradients)", value=True, key="w_trust_grads"
    )
    keys = [k for k in T.DEFAULT_KEYS if k in normviz.all_keys(lm)]
    try:
        with st.spinner("Running the interventions …"):
            t = memoised(
                session,
                ("trust", heads, gradients),
                lambda: explain_text(session, keys, heads=heads, gradients=gradients, ig_steps=16),
            )
    except normviz.core.errors.NormvizError as exc:
        frame.stop_with("error", str(exc))
    # the token as the Why page shows it (␣ for its leading space), never a Python repr
    what = t.measure if t.token_text is None else f"{t.measure} of {shown(t.token_text)}"
    st.markdown(
        f"Explained: the **{ui.plain(what, 80)}** at position {t.position} (total {t.total:.4g}). {t.knockout.question}"
    )
    for key, why in t.refused.items():
        ui.say("info", f"{key}: {why}")
    labels = list(session.labels)
    rows = t.rows()
    beside = T.beside(rows, t.attributions)  # the verdict's best first: the chart shows the map it names
    line = T.verdict(rows)
    if line:
        st.info(ui.plain(line, None))
    ui.chart(
        vt.truth_beside(
            labels,
            t.knockout.delta,
            {T.method_name(k): t.attributions[k] for k in beside},
            font_size=fs,
            colour_keys=beside,  # a colour per method, whatever its place
        ),
        key="trust_beside",
        filename="trust_beside",
    )
    df = T.table(rows)
    ui.table(df, view.present, hide_index=True, width="stretch")
    if any((r.get("comprehensiveness") or 0) < 0 for r in rows):
        st.caption(T.NEGATIVE_COMPREHENSIVENESS)
    st.caption(
        f"Ranks over positions {list(map(int, t.scored))}. Baselines: "
        + "; ".join(f"{k}: {v}" for k, v in t.baselines.items())
    )
    corpus_section(lm.name, fs)
    with st.expander("What the numbers mean", expanded=False):
        st.markdown(T.MEANING)
    with st.expander("Known circuits: which method finds the circuit a model uses", expanded=False):
        KC.render(ui, st, fs)


def corpus_section(name: str, fs: int) -> None:
    """The ranking over the shipped corpus run of this model, with its 95 % intervals (or how to make one)."""
    rows = shipped(name)
    st.subheader("Over the shipped corpus sample")
    if rows is None:
        st.caption(
            f"No corpus run is shipped for {ui.plain(name, 80)}; run `normviz faithfulness --model "
            f"{ui.plain(name, 80)} --corpus FILE --out DIR`."
        )
    else:
        about = shipped_about(name)
        if about:
            st.caption(f"The run: {about}")
        score = st.selectbox(
            "Score",
            ["spearman", "kendall", "comprehensiveness", "sufficiency", "spearman_heads"],
            key="w_trust_score",
            format_func=T.SCORE_NAMES.get,
        )
        ct = T.corpus_table(rows, score)
        ui.chart(
            vt.score_bars(
                [T.method_name(k) for k in ct["attribution"]],
                ct["mean"],
                ct["95% lo"],
                ct["95% hi"],
                title=f"{T.SCORE_NAMES[score]} (mean, 95% bootstrap interval)",
                reference=T.method_name("attention"),
                chance=T.method_name("random"),
                font_size=fs,
                colour_keys=list(ct["attribution"]),  # the same colour per method as the chart above
            ),
            key="trust_corpus",
            filename="trust_corpus",
        )


ui.run_page(page)
