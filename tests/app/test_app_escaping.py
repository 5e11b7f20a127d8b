"""Tokens typed as markup show as typed on Explore and Translate: every label and title of every chart went
through the one escaping function (normviz.viz.labels.plotly_text) exactly once."""

from __future__ import annotations

import pytest

from ..helpers.app import app, figures, no_exception
from ..reliability.helpers import keyed_strings

TEMPLATES = {"hovertemplate", "texttemplate"}


def _shown(obj):
    return (text for key, text in keyed_strings(obj) if key not in TEMPLATES)


@pytest.mark.parametrize(
    "page,query",
    [
        ("app.py", {"text": "<b>x</b> and <!--<script> & more"}),
        ("app_pages/4_Translate.py", {"src": "the <b> cat & dog", "tgt": "mao <b> & inu"}),
    ],
)
def test_markup_in_tokens_is_escaped_once_in_every_chart(page, query):
    at = app(page, query=query)
    at.run()
    no_exception(at)
    shown = [s for fig in figures(at) for s in _shown(fig)]
    assert figures(at) and any("&lt;" in s for s in shown)
    raw = [s for s in shown if "<" in s.replace("<br>", "")]  # the builders' own line breaks only
    assert not raw, raw[:5]
    assert not [s for s in shown if "&amp;lt;" in s or "&amp;amp;" in s]  # never twice
