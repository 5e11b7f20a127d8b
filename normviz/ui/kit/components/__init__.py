"""The app's browser-side scripts, kept as files of their own (shipped as package data):

- ``main_width.js`` measures the page's main column (:func:`normviz.ui.kit.sizing.main_width`);
- ``instant_switch.js`` redraws Explore's panels from frames when the layer/head controls move
  (:mod:`normviz.ui.kit.instant`); the controls it watches are named in :mod:`normviz.ui.kit.controls` and handed to it
  in its data, never written into the script;
- ``stage_keys.js`` sends stage mode's arrow keys and Esc to the server (:func:`normviz.ui.kit.stage.keyboard`);
- ``theme.js`` applies a link's ``theme=dark|light`` in the browser (:mod:`normviz.ui.kit.theme`);
- ``grid_click.js`` sends the layer and head of a clicked square of Overview's grids
  (:func:`normviz.ui.kit.stage.grid_clicks`);
- ``row_click.js`` sends the row of a clicked heatmap cell (the Why page's Continuation view: a step;
  :func:`normviz.ui.kit.stage.row_clicks`);
- ``url_text.js`` writes what the visitor types into a text box into the URL at once
  (:func:`normviz.ui.kit.session_view.text_box`: a text typed while the server was away is not lost).

:func:`component` makes each a Streamlit (components v2) component once per process.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTS = {
    "normviz_main_width": "main_width.js",
    "normviz_instant": "instant_switch.js",
    "normviz_stage_keys": "stage_keys.js",
    "normviz_grid_click": "grid_click.js",
    "normviz_row_click": "row_click.js",
    "normviz_theme": "theme.js",
    "normviz_url_text": "url_text.js",
}


def source(name: str) -> str:
    """The text of script ``name`` (a key of :data:`SCRIPTS`)."""
    return (HERE / SCRIPTS[name]).read_text(encoding="utf-8")


@lru_cache(maxsize=None)
def component(name: str):
    """The components-v2 component of script ``name``; raises where Streamlit has no components v2."""
    import streamlit.components.v2 as components

    return components.component(name, js=source(name), isolate_styles=False)
