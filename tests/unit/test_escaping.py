"""Escape once, everywhere: every figure shows its labels and titles as typed (plotly reads <b>, <br>, <a> in
them as markup), and the standalone page's JSON data block writes <, >, & as \\u escapes so that a title
such as ``<!--<script>`` cannot make the HTML parser swallow the rest of the page."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from normviz import viz
from normviz.viz.alignment import alignment_figure
from normviz.viz.html import script_json
from normviz.viz.labels import plotly_text, position_of

PAYLOADS = ["<!--<script>", "<b>x</b>", "a & b</script>"]
LABELS = ["<b>x</b>", "<!--<script>", "a&b", "<i>", "plain"]
ESCAPED = "&lt;b&gt;x&lt;/b&gt;"
MARKUP_OK = {"hovertemplate", "texttemplate"}  # the builders' own templates hold <br>, <extra>


def _strings(obj, key=None):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _strings(v, k)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _strings(v, key)
    elif isinstance(obj, np.ndarray) and obj.dtype == object:
        yield from _strings(obj.tolist(), key)
    elif isinstance(obj, str) and key not in MARKUP_OK:
        yield key, obj


def _raw_markup(fig) -> list[tuple[str, str]]:
    """(key, text) of every shown string holding a payload's raw markup."""
    bad = ("<b>x", "<!--", "<script", "<i>", "a&b")
    return [(k, s) for k, s in _strings(fig.to_plotly_json()) if any(b in s for b in bad)]


def test_plotly_text_escapes_the_three_characters_once():
    assert plotly_text("<b>x</b> & y") == "&lt;b&gt;x&lt;/b&gt; &amp; y"
    assert plotly_text("&lt;") == "&amp;lt;"  # typed entities stay as typed
    assert plotly_text("title\n<b>") == "title<br>&lt;b&gt;"  # a newline is the one line break a caller asks for


@pytest.mark.parametrize("payload", PAYLOADS)
def test_script_json_holds_no_markup_and_round_trips(payload):
    text = script_json({"title": payload, "values": [1.5, None]})
    assert not set("<>&") & set(text)
    assert json.loads(text) == {"title": payload, "values": [1.5, None]}


def _figures(title: str):
    m = np.random.default_rng(0).random((5, 5))
    return {
        "heatmap": viz.heatmap(m, LABELS, title=title),
        "heatmap_threshold": viz.heatmap(m, LABELS, title=title, threshold=0.3, causal=True),
        "lines": viz.lines(m, LABELS, title=title, focus=0),
        "fx_strip": viz.fx_strip(m[0], LABELS + [], title=title),
        "bars": viz.bars({title: m[0]}, LABELS, focus_label=LABELS[0]),
        "grid": viz.grid(np.stack([np.stack([m, m])]), LABELS, title=title, head_names=["<b>h</b>", "h1"]),
        "player": viz.layer_player(np.stack([m, 2 * m]), LABELS, title=title),
        "difference": viz.difference(m, m.T, LABELS, name_a="<b>x</b>", name_b="B"),
        "alignment": alignment_figure(LABELS, LABELS[::-1], {(0, 1)}, title=title),
    }


@pytest.mark.parametrize(
    "name", ["heatmap", "heatmap_threshold", "lines", "fx_strip", "bars", "grid", "player", "difference", "alignment"]
)
def test_every_figure_shows_labels_and_titles_as_typed(name):
    fig = _figures("<b>x</b> <!--<script>")[name]
    assert not _raw_markup(fig), _raw_markup(fig)[:5]
    assert any(ESCAPED in s for _, s in _strings(fig.to_plotly_json()))


def test_heatmap_axis_names_still_give_the_position_back():
    fig = viz.heatmap(np.eye(5), LABELS)
    assert [position_of(y) for y in fig.data[0].y] == list(range(5))


def _data_block(page: str) -> str:
    m = re.search(r'<script type="application/json" id="normviz-data">(.*?)</script>', page, re.S)
    assert m
    return m.group(1)


def test_standalone_page_data_block_survives_a_hostile_title():
    m = np.random.default_rng(1).random((5, 5))
    title = "<!--<script> & </script>"
    page = viz.standalone_html(
        [viz.heatmap(m, LABELS, title=title), viz.lines(m, LABELS)],
        title=title,
        description="<b>x</b>",
        captions=["<!--<script>", ""],
    )
    block = _data_block(page)
    assert not set("<>&") & set(block)
    data = json.loads(block)
    assert data["title"] == title and data["panels"][0]["title"] == title  # the reader gets the text as typed
    np.testing.assert_allclose(np.array(data["panels"][0]["values"]), m, rtol=1e-12)
    assert "<!--" not in page.split("<body>", 1)[1].split('<script type="text/javascript">')[0]
    assert page.count("<title>&lt;!--&lt;script&gt;") == 1
