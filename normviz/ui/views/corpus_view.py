"""The Corpus page's regions: the inputs (a text, the statistics, the run), one run of
:func:`normviz.corpus.run_corpus` with a progress bar, the figures of :mod:`normviz.viz.corpus` and the downloads.
Every number is computed in ``normviz.corpus``."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import streamlit as st

from ...core.errors import NormvizError
from ...corpus import STAT_TITLES, STATISTICS, CorpusJob, run_corpus
from ...corpus.samples import SAMPLES
from ...viz import corpus as plots
from ..kit import data as ui_data
from ..kit import st_parts as ui
from . import frame


def draw_inputs(max_lines: int):
    """The text (a bundled sample or an upload), the lines and statistics, the batch size, the Run button.
    Gives (the text's bytes, lines, statistics, batch, Run pressed)."""
    c1, c2 = st.columns(2)
    with c1:
        source = st.radio("Text", ["Bundled sample", "Upload a file"], horizontal=True, key="corpus_source")
        if source == "Bundled sample":
            sample = st.selectbox(
                "Sample",
                list(SAMPLES),
                key="corpus_sample",
                help="Public domain, from Debian's miscfiles package (assets/corpus/SOURCE.md).",
            )
            data = SAMPLES[sample].read_bytes()
        else:
            up = st.file_uploader(
                "Text file: one sentence per line, or two sentences separated by a tab",
                type=["txt", "tsv"],
                key="corpus_upload",
            )
            data = b""
            if up is not None:
                refusal = ui_data.upload_refusal(up.name, up.size, int(ui.settings().max_upload_mb * 2**20))
                if refusal:
                    frame.stop_with("error", refusal)
                data = up.getvalue()
        cap = st.number_input(
            f"Lines to analyse (at most {max_lines})",
            min_value=1,
            max_value=max_lines,
            value=min(40, max_lines),
            key="corpus_cap",
        )
    with c2:
        stats = st.multiselect(
            "Statistics",
            list(STATISTICS),
            default=[s for s in STATISTICS if s != "ff_change"],
            format_func=lambda s: STAT_TITLES[s],
            key="corpus_stats",
            help="The FF change needs the feed-forward decomposition, by far the costliest map.",
        )
        batch = st.number_input(
            "Batch size (sentences per forward pass)", min_value=1, max_value=64, value=8, key="corpus_batch"
        )
        go = st.button("Run", type="primary", key="corpus_run")
    return data, cap, stats, batch, go


def run(model: str, data: bytes, stats: list[str], cap: int, batch: int):
    """One corpus run with a progress bar (the inputs checked first; a message and the run stops)."""
    if not model:
        st.error("No model chosen: pick one in the sidebar.")
        st.stop()
    if not data.strip():
        st.error("The text is empty: upload a file with one sentence per line, or use the bundled sample.")
        st.stop()
    if not stats:
        st.error("Choose at least one statistic.")
        st.stop()
    lm = frame.model(model)
    bar = st.progress(0.0, text="Starting…")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.txt"
        path.write_bytes(data)
        job = CorpusJob(
            model=model,
            input=str(path),
            out=str(Path(tmp) / "out"),
            stats=tuple(stats),
            batch_size=int(batch),
            chunk_size=max(int(batch), 16),
            limit=int(cap),
            fresh=True,
            max_tokens=ui.settings().max_tokens,
        )
        try:
            res = run_corpus(
                job,
                lm=lm,
                show_bar=False,
                progress=lambda done, total: bar.progress(done / total, text=f"{done}/{total} lines"),
            )
        except NormvizError as exc:
            bar.empty()
            frame.stop_with("error", ui.shorten_error(exc, 600))
    bar.empty()
    return res


def draw_results(res, fs: int) -> None:
    """The run's figures: categories, mixing ratios, the FF change, ‖f(x)‖, heads × layers."""
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
        st.caption(
            "The 2021 paper's definition, as its code computes it: r_i = ‖Σ_{j≠i} v_ij‖ / (‖Σ_{j≠i} v_ij‖ + "
            "‖v_ii‖) (the vectors from other tokens summed, then the norm); for weights Σ_{j≠i} ᾱ_ij with heads "
            "averaged. Pooled over tokens per layer. Dashed lines: BERT-base means of Kobayashi et al. 2021, "
            "Table 2."
        )
        st.plotly_chart(ui.themed(plots.layer_lines(ls, mix, "Mixing ratio", font_size=fs)), width="stretch")
    if share:
        with st.expander("Share of non-self norms (a different statistic, not comparable with Table 2)"):
            st.caption(
                "Σ_{j≠i} ‖v_ij‖ / Σ_j ‖v_ij‖: the share of the norms of the other tokens' parts. Norms of "
                "parts add up to more than the norm of their sum, so this is larger than the paper's ratio."
            )
            st.plotly_chart(
                ui.themed(plots.layer_lines(ls, share, "Share of non-self norms", reference=False, font_size=fs)),
                width="stretch",
            )
    ffc = [c for c in ls.columns if c.startswith("ff_change_")]
    if ffc:
        st.subheader("Contextualisation change by the FF block")
        st.plotly_chart(
            ui.themed(plots.layer_lines(ls, ffc, "1 − Spearman ρ(map before FF, map after)", font_size=fs)),
            width="stretch",
        )
    other = [c for c in ls.columns if c in ("fx_cv", "rho_alpha_fx", "rho_fx_freq")]
    if other:
        st.subheader("‖f(x)‖ per layer")
        st.plotly_chart(
            ui.themed(plots.layer_lines(ls, other, "‖f(x)‖ statistics (mean over heads)", font_size=fs)),
            width="stretch",
        )
    hcols = plots.head_columns(tabs["head_stats"])
    if hcols:
        st.subheader("Head × layer")
        col = st.selectbox("Statistic", hcols, format_func=plots.column_title, key="corpus_head_stat")
        st.plotly_chart(ui.themed(plots.head_heatmap(tabs["head_stats"], col, font_size=fs)), width="stretch")


def draw_downloads(res) -> None:
    """Every table as CSV, the summary as JSON (and shown)."""
    tabs, s = res.tables, res.summary
    st.subheader("Downloads")
    cols = st.columns(len(tabs) + 1)
    for c, (name, df) in zip(cols, tabs.items()):
        c.download_button(
            f"{name}.csv", df.to_csv(index=False).encode(), file_name=f"{name}.csv", mime="text/csv", key=f"dl_{name}"
        )
    cols[-1].download_button(
        "summary.json",
        json.dumps(s, indent=1, ensure_ascii=False).encode(),
        file_name="summary.json",
        mime="application/json",
        key="dl_summary",
    )
    with st.expander("Summary"):
        st.json(s)
