"""The Why page's top-10 and input-token charts fit their panel (issue 42's gemma3 screenshot): the model-and-text
line starts at the figure's left edge, like the title, not at the plot area's (which the longest tick label moves
right), and each axis makes room for its longest tick label (a rotated "<bos> [0]" reached past the left edge)."""

import numpy as np
import plotly.io as pio
import pytest

from normviz.ui.kit import stage
from normviz.viz import why as vw

from ..helpers.browser import chromium, find_browser, wait_until

TEXT = "The cat sat on the mat because it was tired."
# each embedded model's tokens for TEXT, its first candidates (gemma3's are long: "<start_of_image>")
MODELS = {
    "gemma3": (
        ["<bos>", "The", " cat", " sat", " on", " the", " mat", " because", " it", " was", " tired", "."],
        ["\n", "\n\n", " The", " It", " He", "<start_of_image>", "  ", "ا", " She", " "],
    ),
    "minilm": (
        ["[CLS]", "the", "cat", "sat", "on", "the", "mat", "because", "it", "was", "tired", ".", "[SEP]"],
        [".", ",", "and", "the", "!", ";", "?", "so", "but", "[SEP]"],
    ),
    "smollm2": (
        ["The", " cat", " sat", " on", " the", " mat", " because", " it", " was", " tired", "."],
        ["\n", " The", " It", " He", " She", " I", " But", " And", " So", "<|endoftext|>"],
    ),
}


def _figures(model: str, fs: int = 12):
    labels, cands = MODELS[model]
    probs = np.linspace(0.31, 0.015, len(cands))
    top = vw.candidates(cands, probs, chosen=0, font_size=fs, title=f"After . [{len(labels) - 1}]: the top 10")
    sources = vw.signed_bars(
        np.r_[17.0, np.linspace(1, 0.2, len(labels) - 1)], labels, extra={"bias": 0.0}, font_size=fs, width=540
    )
    sources.update_layout(title=dict(text="Which input tokens carry logit(↵)"))
    for fig in (top, sources):
        stage.context_line(fig, model, TEXT, fs)
    return top, sources


def test_the_context_line_sits_under_the_title_and_axes_make_room_for_their_ticks():
    for model in MODELS:
        for fig in _figures(model):
            assert not fig.layout.annotations  # an annotation would start at the plot area's left
            assert fig.layout.title.subtitle.text.startswith(f"{model} · “The cat")
            assert fig.layout.title.x == 0 and fig.layout.title.xref in (None, "container")
            assert fig.layout.xaxis.automargin is True and fig.layout.yaxis.automargin is True


@pytest.mark.browser
@pytest.mark.timeout(240)
@pytest.mark.skipif(find_browser() is None, reason="no chromium/chromedriver")
@pytest.mark.parametrize("fs,width", [(12, 370), (20, 700)])  # the 2:3 column at 1280 px; stage, one column
def test_every_label_of_the_why_charts_is_inside_the_figure(tmp_path, fs, width):
    boxes = """const s = document.querySelector('.main-svg').getBoundingClientRect(); const out = [];
    document.querySelectorAll('.main-svg text').forEach(t => { const b = t.getBoundingClientRect();
      if (b.width > 0) out.push([t.textContent, b.left - s.left, b.right - s.left, s.width]); });
    return out;"""
    with chromium(width + 60, 900) as d:
        for model in MODELS:
            for k, fig in enumerate(_figures(model, fs)):
                page = tmp_path / f"{model}_{k}.html"
                page.write_text(pio.to_html(fig, include_plotlyjs=True, default_width=f"{width}px"), encoding="utf-8")
                d.get(page.as_uri())
                wait_until(d, "return document.querySelectorAll('.main-svg text').length > 5;", timeout=60, idle=False)
                texts = d.execute_script(boxes)
                assert any(t[0].startswith(f"{model} · ") for t in texts)
                cut = [t for t in texts if t[1] < -0.5 or t[2] > t[3] + 0.5]
                assert not cut, (model, k, cut)
