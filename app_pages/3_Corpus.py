"""normviz · Corpus: the papers' statistics over a whole text (weights vs norms, mixing ratios, FF change).

Thin page: the inputs, one run of :func:`normviz.corpus.run_corpus` with a progress bar, then figures from
:mod:`normviz.viz.corpus` and downloads (its regions: :mod:`normviz.ui.views.corpus_view`). Every number is computed
in ``normviz.corpus``.
"""

import hashlib

import streamlit as st

from normviz.ui.kit import st_parts as ui
from normviz.ui.views import corpus_view as V

MAX_LINES = ui.settings().corpus_max_lines  # NORMVIZ_CORPUS_MAX_LINES, validated: cap for public demos

ui.page_config("Corpus", "📚")
TEXT_KEYS = ()  # its texts are files and samples, not the view's text (ui.follow_text; tested for every page)


def page() -> None:
    view, fs = ui.start_page()  # the model is chosen in the sidebar, as on the other pages
    ui.escape_key(view.present)  # Esc leaves stage mode (this page has no layer/head keys)
    ui.follow_text(TEXT_KEYS, view.model)
    ui.save_view(view)
    st.header("Corpus statistics")
    st.caption(
        "Do the papers' findings hold for this model and this text? Kobayashi et al. 2020 (weights vs norms, "
        "‖f(x)‖), 2021 (mixing ratios with residual and LayerNorm), 2024 (the feed-forward block)."
    )
    model = view.model.strip()
    data, cap, stats, batch, go = V.draw_inputs(MAX_LINES)

    key = (model, hashlib.sha256(data).hexdigest(), tuple(stats), int(cap), int(batch))
    if go:
        st.session_state["corpus_result"] = (key, V.run(model, data, stats, int(cap), int(batch)))

    stored = st.session_state.get("corpus_result")
    if stored is None:
        st.info("Choose a model, a text and statistics, then press Run.")
        st.stop()
    stored_key, res = stored
    if stored_key != key:
        st.caption("Showing the previous run; press Run to apply the new settings.")
    s = res.summary
    st.markdown(f"**{s['sequences']}** sequences, **{s['tokens']}** tokens, model {ui.lit(s['model'])}.")
    if res.bad_lines:
        with st.expander(f"{len(res.bad_lines)} lines skipped"):
            st.dataframe(res.tables["bad_lines"], hide_index=True)
    V.draw_results(res, fs)
    V.draw_downloads(res)


ui.run_page(page)
