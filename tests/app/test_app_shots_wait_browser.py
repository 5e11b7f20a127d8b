"""The screenshots wait for every chart to draw (issue 42): ``tools.browser.wait_drawn`` on a page built like the
app's (Streamlit's test ids around plotly charts) in the shared Chromium; a chart in a tab not shown (Learn's) is
not waited for: it is not drawn until its tab opens. The old wait (``wait_for_app``) took a
page as ready once one chart had its svg, while another was still empty or half drawn."""

from __future__ import annotations

import json
from pathlib import Path

import plotly
import pytest

from ..helpers.browser import app_in_chromium, wait_drawn, wait_for_app

pytestmark = [pytest.mark.browser, pytest.mark.timeout(300)]
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
PAGE = """<html><head><script src="{js}"></script></head><body><div data-testid="stMain">
<div data-testid="stElementContainer" class="st-key-grid_attention"><div data-testid="stPlotlyChart">
<div id="a"></div></div></div>
<div data-testid="stElementContainer" class="st-key-grid_norm"><div data-testid="stPlotlyChart">
<div id="b"></div></div></div>
<div style="display: none"><div data-testid="stPlotlyChart"><div id="c"></div></div></div></div>
<script>
Plotly.newPlot('a', [{{type: 'heatmap', z: [[1, 2], [3, 4]]}}],
  {{title: {{text: 'Attention'}}, width: 300, height: 300}});
window.drawNorm = () => Plotly.newPlot('b', [{{type: 'heatmap', z: [[1, 2], [3, 4]]}},
  {{type: 'scatter', y: [1, 2]}}], {{title: {{text: 'Norm'}}, width: 300, height: 300}});
</script></body></html>"""


def test_wait_drawn_names_the_chart_that_did_not_draw_and_returns_once_all_have(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(PAGE.format(js=PLOTLY_JS.as_uri()))
    with app_in_chromium() as (_, driver):
        driver.get(page.as_uri())
        # the old wait calls this page ready: one chart drew, the other is empty
        assert not wait_for_app(driver, min_charts=1, timeout=20).get("timed_out")
        with pytest.raises(TimeoutError, match=r"grid_norm: not laid out") as e:
            wait_drawn(driver, min_charts=2, timeout=3, settle=0.5)
        assert "grid_attention" not in str(e.value)
        driver.execute_script("window.drawNorm();")
        state = wait_drawn(driver, min_charts=2, timeout=30, settle=0.5)
        got = {c["name"]: (c["want"], c["got"]) for c in state["charts"]}
        assert got == {'grid_attention "Attention"': (1, 1), 'grid_norm "Norm"': (2, 2)}, json.dumps(state)
        # a trace not yet drawn (its group removed, as while plotly redraws) is named with its count
        driver.execute_script("document.querySelector('#b .scatterlayer .trace').remove();")
        with pytest.raises(TimeoutError, match=r'grid_norm "Norm": 1 of 2 traces drawn'):
            wait_drawn(driver, min_charts=2, timeout=2, settle=0.5)


def test_wait_drawn_waits_out_the_pages_loading_placeholder(tmp_path):
    """smollm2's Corpus at 1920×1080 was shot as Streamlit's grey page placeholder (stAppSkeleton): Corpus draws no
    chart, and the wait counted only an element's own placeholder (stSkeleton)."""
    page = tmp_path / "page.html"
    page.write_text(
        '<html><body><div data-testid="stMain"><div data-testid="stElementContainer">Corpus</div>'
        '<div data-testid="stAppSkeleton" id="s"></div></div></body></html>'
    )
    with app_in_chromium() as (_, driver):
        driver.get(page.as_uri())
        with pytest.raises(TimeoutError, match=r"skeleton: 1"):
            wait_drawn(driver, min_charts=0, timeout=2, settle=0.3)
        driver.execute_script("document.getElementById('s').remove();")
        assert wait_drawn(driver, min_charts=0, timeout=20, settle=0.3)["skeleton"] == 0
