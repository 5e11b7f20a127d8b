"""Issue 42 item 6 in Chromium: the Learn page's "Row of 'cat [2]'" chart (two bar rows, rotated token labels)
does not overlap itself: the upper row's tick labels end above the lower row's title, at the page's font and at
stage mode's, for short and long labels. Measured on the figure drawn by plotly.js (the one bundled with plotly),
no server needed. On 4c42c33 the gap was a share of the figure's height and the lower title sat on the labels."""

from __future__ import annotations

import time

import numpy as np
import pytest

from normviz import viz

from ..helpers.browser import chromium, require_browser

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]
SHORT = ["[CLS]", "the", "cat", "sat", "on", "the·2", "mat", "because", "it", "was", "tired", ".", "[SEP]"]
LONG = ["<|im_start|>", "international", "negotiations", "concerning", "environmental", "responsibilities"]
MEASURE = """
const plots = document.querySelectorAll('.js-plotly-plot');
const gd = plots[plots.length - 1];
if (!gd) return {labels_bottom: null, titles_top: [], n: 0};  // not drawn yet (a loaded machine)
const upper = Array.from(gd.querySelectorAll('.xaxislayer-above .xtick text'))
                   .filter(t => t.closest('.xaxislayer-above') === gd.querySelectorAll('.xaxislayer-above')[0]);
const low = Math.max(...upper.map(t => t.getBoundingClientRect().bottom));
const titles = Array.from(gd.querySelectorAll('.annotation')).map(a => a.getBoundingClientRect());
return {labels_bottom: low, titles_top: titles.map(r => r.top), n: upper.length};
"""


@pytest.mark.parametrize("font_size", [12, 20])
@pytest.mark.parametrize("labels", [SHORT, LONG], ids=["sentence", "long-words"])
def test_lower_title_sits_below_the_upper_labels(tmp_path, font_size, labels):
    require_browser()
    n = len(labels)
    rng = np.random.default_rng(0)
    fig = viz.bars(
        {"share of the weight α": rng.random(n), "share of the norm ‖α f(x)‖": rng.random(n)},
        labels,
        [list(range(n)), list(range(n))],
        focus_label="cat [2]",
        font_size=font_size,
        width=600,
    )
    page = tmp_path / "bars.html"
    page.write_text(fig.to_html(include_plotlyjs=True, full_html=True), encoding="utf-8")
    with chromium(1280, 1400) as driver:
        driver.get(page.as_uri())
        got = None
        for _ in range(60):
            got = driver.execute_script(MEASURE)
            if got["n"] and len(got["titles_top"]) == 2:
                break
            time.sleep(0.5)
    assert got["n"] >= 1 and len(got["titles_top"]) == 2, got
    lower_title = max(got["titles_top"])
    assert got["labels_bottom"] <= lower_title, got
