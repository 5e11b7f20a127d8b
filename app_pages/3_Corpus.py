"""normviz · Corpus: the papers' statistics over a whole text (weights vs norms, mixing ratios, FF change).

Thin page: widgets, one run of :func:`normviz.corpus.run_corpus` with a progress bar, then figures from
:mod:`normviz.viz.corpus` and downloads. Every number is computed in ``normviz.corpus``.
"""
import hashlib
import json
import tempfile
from pathlib import Path

import streamlit as st

from normviz.core.errors import NormvizError
from normviz.corpus import STAT_TITLES, STATISTICS, CorpusJob, run_corpus
from normviz.corpus.samples import SAMPLES
from normviz.ui.kit import data as ui_data
from normviz.ui.kit import st_parts as ui
from normviz.viz import corpus as plots

MAX_LINES = ui.settings().corpus_max_lines  # NORMVIZ_CORPUS_MAX_LINES, validated: cap for public demos

ui.page_config("Corpus", "📚")
TEXT_KEYS = ()  # its texts are files and samples, not the view's text (ui.follow_text; tested for every page)


def page() -> None:
    view, fs = ui.start_page()  # the model is chosen in the sidebar, as on the other pages
    ui.escape_key(view.present)  # Esc leaves stage mode (this page has no layer/head keys)
    ui.follow_text(TEXT_KEYS, view.model)
    ui.save_view(view)
    st.header("Corpus statistics")
    st.caption("Do the papers' findings hold for this model and this text? Kobayashi et al. 2020 (weights vs norms, "
               "‖f(x)‖), 2021 (mixing ratios with residual and LayerNorm), 2024 (the feed-forward block).")
    model = view.model.strip()

    c1, c2 = st.columns(2)
    with c1:
        source = st.radio("Text", ["Bundled sample", "Upload a file"], horizontal=True, key="corpus_source")
        if source == "Bundled sample":
            sample = st.selectbox("Sample", list(SAMPLES), key="corpus_sample",
                                  help="Public domain, from Debian's miscfiles package (assets/corpus/SOURCE.md).")
            data = SAMPLES[sample].read_bytes()
        else:
            up = st.file_uploader("Text file: one sentence per line, or two sentences separated by a tab",
                                  type=["txt", "tsv"], key="corpus_upload")
            data = b""
            if up is not None:
                refusal = ui_data.upload_refusal(up.name, up.size, int(ui.settings().max_upload_mb * 2**20))
                if refusal:
                    ui.say("error", refusal)
                    st.stop()
                data = up.getvalue()
        cap = st.number_input(f"Lines to analyse (at most {MAX_LINES})", min_value=1, max_value=MAX_LINES,
                              value=min(40, MAX_LINES), key="corpus_cap")
    with c2:
        stats = st.multiselect("Statistics", list(STATISTICS), default=[s for s in STATISTICS if s != "ff_change"],
                               format_func=lambda s: STAT_TITLES[s], key="corpus_stats",
                               help="The FF change needs the feed-forward decomposition, by far the costliest map.")
        batch = st.number_input("Batch size (sentences per forward pass)", min_value=1, max_value=64, value=8,
                                key="corpus_batch")
        go = st.button("Run", type="primary", key="corpus_run")

    key = (model, hashlib.sha256(data).hexdigest(), tuple(stats), int(cap), int(batch))
    if go:
        if not model:
            st.error("No model chosen: pick one in the sidebar.")
            st.stop()
        if not data.strip():
            st.error("The text is empty: upload a file with one sentence per line, or use the bundled sample.")
            st.stop()
        if not stats:
            st.error("Choose at least one statistic.")
            st.stop()
        lm = ui.load_model(model)
        if lm is None:
            st.stop()
        ui.show_device(lm)
        bar = st.progress(0.0, text="Starting…")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "corpus.txt"
            path.write_bytes(data)
            job = CorpusJob(model=model, input=str(path), out=str(Path(tmp) / "out"), stats=tuple(stats),
                            batch_size=int(batch), chunk_size=max(int(batch), 16), limit=int(cap), fresh=True,
                            max_tokens=ui.settings().max_tokens)
            try:
                res = run_corpus(job, lm=lm, show_bar=False,
                                 progress=lambda done, total: bar.progress(done / total, text=f"{done}/{total} lines"))
            except NormvizError as exc:
                bar.empty()
                ui.say("error", ui.shorten_error(exc, 600))
                st.stop()
        bar.empty()
        st.session_state["corpus_result"] = (key, res)

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

    tabs = res.tables
    if "category_shares" in tabs:
        st.subheader("Weights vs norms by token category")
        st.plotly_chart(ui.themed(plots.category_shares(tabs["category_shares"], font_size=fs)), width="stretch")
        cat = st.selectbox("Category per layer", list(tabs["category_shares"]["category"].unique()), key="corpus_cat")
        st.plotly_chart(ui.themed(plots.category_by_layer(tabs["category_shares"], cat, font_size=fs)), width="stretch")
    ls = tabs["layer_stats"]
    mix = [c for c in ls.columns if c.startswith("mixing_") and not c.startswith("mixing_share_")]
    share = [c for c in ls.columns if c.startswith("mixing_share_")]
    if mix:
        st.subheader("Context-mixing ratio per layer")
        st.caption("The 2021 paper's definition, as its code computes it: r_i = ‖Σ_{j≠i} v_ij‖ / (‖Σ_{j≠i} v_ij‖ + "
                   "‖v_ii‖) (the vectors from other tokens summed, then the norm); for weights Σ_{j≠i} ᾱ_ij with heads "
                   "averaged. Pooled over tokens per layer. Dashed lines: BERT-base means of Kobayashi et al. 2021, "
                   "Table 2.")
        st.plotly_chart(ui.themed(plots.layer_lines(ls, mix, "Mixing ratio", font_size=fs)), width="stretch")
    if share:
        with st.expander("Share of non-self norms (a different statistic, not comparable with Table 2)"):
            st.caption("Σ_{j≠i} ‖v_ij‖ / Σ_j ‖v_ij‖: the share of the norms of the other tokens' parts. Norms of parts "
                       "add up to more than the norm of their sum, so this is larger than the paper's ratio.")
            st.plotly_chart(ui.themed(plots.layer_lines(ls, share, "Share of non-self norms", reference=False,
                                                        font_size=fs)),
                            width="stretch")
    ffc = [c for c in ls.columns if c.startswith("ff_change_")]
    if ffc:
        st.subheader("Contextualisation change by the FF block")
        st.plotly_chart(ui.themed(plots.layer_lines(ls, ffc, "1 − Spearman ρ(map before FF, map after)", font_size=fs)),
                        width="stretch")
    other = [c for c in ls.columns if c in ("fx_cv", "rho_alpha_fx", "rho_fx_freq")]
    if other:
        st.subheader("‖f(x)‖ per layer")
        st.plotly_chart(ui.themed(plots.layer_lines(ls, other, "‖f(x)‖ statistics (mean over heads)", font_size=fs)),
                        width="stretch")
    hcols = plots.head_columns(tabs["head_stats"])
    if hcols:
        st.subheader("Head × layer")
        col = st.selectbox("Statistic", hcols, format_func=plots.column_title, key="corpus_head_stat")
        st.plotly_chart(ui.themed(plots.head_heatmap(tabs["head_stats"], col, font_size=fs)), width="stretch")

    st.subheader("Downloads")
    cols = st.columns(len(tabs) + 1)
    for c, (name, df) in zip(cols, tabs.items()):
        c.download_button(f"{name}.csv", df.to_csv(index=False).encode(), file_name=f"{name}.csv", mime="text/csv",
                          key=f"dl_{name}")
    cols[-1].download_button("summary.json", json.dumps(s, indent=1, ensure_ascii=False).encode(),
                             file_name="summary.json", mime="application/json", key="dl_summary")
    with st.expander("Summary"):
        st.json(s)


ui.run_page(page)
