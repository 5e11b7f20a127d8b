"""app_pages/3_Corpus.py driven headlessly with Streamlit's AppTest: sample run, upload path errors, plots,
downloads."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

PAGE = str(Path(__file__).resolve().parents[2] / "app_pages" / "3_Corpus.py")


@pytest.fixture()
def app(monkeypatch):
    monkeypatch.setenv("NORMVIZ_CORPUS_MAX_LINES", "50")
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.run()
    assert not at.exception
    return at


def test_bundled_sample_runs_and_shows_plots_and_downloads(app):
    at = app
    assert "press Run" in at.info[0].value
    at.multiselect(key="corpus_stats").set_value(["shares", "mixing", "cv"])
    at.number_input(key="corpus_cap").set_value(4)
    at.button(key="corpus_run").click()
    at.run()
    assert not at.exception, at.exception
    text = " ".join(m.value for m in at.markdown)
    assert "**4** sequences" in text
    titles = [h.value for h in at.subheader]
    assert "Weights vs norms by token category" in titles and "Context-mixing ratio per layer" in titles
    assert "Head × layer" in titles and "Downloads" in titles
    at.selectbox(key="corpus_head_stat").set_value("mixing_norm")
    at.run()
    assert not at.exception


def test_upload_without_file_and_empty_stats_are_clear_errors(app):
    at = app
    at.radio(key="corpus_source").set_value("Upload a file")
    at.run()
    at.button(key="corpus_run").click()
    at.run()
    assert not at.exception
    assert "The text is empty" in at.error[0].value
    at.radio(key="corpus_source").set_value("Bundled sample")
    at.multiselect(key="corpus_stats").set_value([])
    at.run()
    at.button(key="corpus_run").click()
    at.run()
    assert "Choose at least one statistic" in at.error[0].value


def test_plot_builders_take_the_tables():
    import numpy as np

    from normviz.corpus.results import tables
    from normviz.corpus.stats import STATISTICS, Accumulator
    from normviz.viz import corpus as plots

    rng = np.random.default_rng(0)
    acc = Accumulator(2, 3, "post", STATISTICS)
    for n in (5, 7):
        a = rng.random((2, 3, n, n))
        a /= a.sum(-1, keepdims=True)
        maps = {"attention": a, "norm": a * rng.random((2, 3, 1, n)), "fx_norm": rng.random((2, 3, n)) + 0.5}
        for k in ("norm_layer", "attn_res", "attn_res_ln", "ff", "ff_res", "ff_res_ln"):
            maps[k] = rng.random((2, n, n))
        labels = ["[CLS]"] + ["w", ",", "."][: n - 2] + ["x"] * max(0, n - 5) + ["[SEP]"]
        acc.add(maps, list(range(n)), labels, labels, [True] + [False] * (n - 2) + [True])
    tabs = tables(acc.state(), 2, 3)
    fig = plots.category_shares(tabs["category_shares"])
    assert [t.name for t in fig.data if t.type == "bar"] == ["weight share", "norm share"]
    assert list(fig.data[0].x) == ["start", "sep", "period", "comma", "other"]
    lines = plots.layer_lines(tabs["layer_stats"], ["mixing_attention", "mixing_attn_res"])
    assert len(lines.data) == 2 and len(lines.layout.shapes) == 2  # two BERT-base reference lines
    heat = plots.head_heatmap(tabs["head_stats"], "rho_alpha_fx")
    assert np.asarray(heat.data[0].z).shape == (3, 2)
    assert plots.category_by_layer(tabs["category_shares"], "start").data[0].y.shape == (2,)


def test_model_from_the_shared_sidebar(app):
    at = app
    at.selectbox(key="w_model_choice").set_value("smollm2")
    at.multiselect(key="corpus_stats").set_value(["shares"])
    at.number_input(key="corpus_cap").set_value(2)
    at.button(key="corpus_run").click()
    at.run()
    assert not at.exception, at.exception
    assert "model `smollm2`" in " ".join(m.value for m in at.markdown)
    assert "smollm2" in " ".join(c.value for c in at.sidebar.caption)  # device line of the app's sidebar
