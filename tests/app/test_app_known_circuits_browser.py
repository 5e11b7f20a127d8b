"""Issue 41: the Trust page's "Known circuits" view in headless Chromium — opened by a visitor (its expander
clicked), it draws the ROC chart (one curve per shipped method, and chance) and the head grid (a heatmap with the
circuit marked and the method's top heads outlined), with no exception box."""

from __future__ import annotations

import pytest

from normviz.trust import circuit_scores as cs

from ..helpers.browser import app_in_chromium, shots_dir, wait_for_app, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

TEXT = "The cat sat on the mat."
_OPEN = """
const s = Array.from(document.querySelectorAll('[data-testid="stExpander"] summary'))
    .find(e => e.innerText.includes('Known circuits'));
if (!s) return false;
if (!s.parentElement.open) s.click();
return true;"""
_VIEW = """
const d = Array.from(document.querySelectorAll('[data-testid="stExpander"]'))
    .find(e => e.innerText.includes('Known circuits'));
if (!d) return null;
const charts = Array.from(d.querySelectorAll('[data-testid="stPlotlyChart"]'));
return {
  charts: charts.length,
  titles: Array.from(d.querySelectorAll('.gtitle')).map(t => t.textContent),
  legend: Array.from(d.querySelectorAll('.legendtext')).map(t => t.textContent),
  heatmap: d.querySelectorAll('.heatmaplayer image, .hm image').length,
  outlines: d.querySelectorAll('.shapelayer path').length,
  width: charts.length ? charts[0].getBoundingClientRect().width : 0,
  exceptions: document.querySelectorAll('[data-testid="stException"]').length,
};"""


@pytest.mark.parametrize(
    "size,query", [((1920, 1080), ""), ((1280, 800), "&present=1")], ids=["normal-1920", "stage-1280"]
)
def test_known_circuits_view_draws_in_chromium(tmp_path, size, query):
    """Normal mode at 1920 and stage mode (``present=1``) at 1280: the view must be readable on stage too."""
    row = cs.shipped()[0]
    log = tmp_path / "streamlit.log"
    with app_in_chromium(log, width=size[0], height=size[1]) as (url, driver):
        driver.get(url + "/Trust?model=minilm&text=" + TEXT.replace(" ", "+") + query)
        state = wait_for_app(driver, min_charts=1, timeout=300)
        assert state.get("exceptions") == 0 and not state.get("timed_out"), (state, log.read_text()[-3000:])
        wait_until(driver, _OPEN, 60)
        wait_until(
            driver,
            "const v = (() => {" + _VIEW + "})(); return v !== null && v.charts >= 2 && "
            "v.heatmap > 0 && v.legend.length > 0;",
            180,
        )
        view = driver.execute_script(_VIEW)
        driver.execute_script(
            "Array.from(document.querySelectorAll('[data-testid=\"stExpander\"] summary'))"
            ".find(e => e.innerText.includes('Known circuits')).scrollIntoView();"
        )
        mode = "stage" if query else "normal"
        driver.save_screenshot(str(shots_dir(tmp_path, "known_circuits") / f"known_circuits_{size[0]}_{mode}.png"))
    assert view["exceptions"] == 0, view
    assert any("ROC" in t for t in view["titles"]) and any("the circuit" in t for t in view["titles"]), view
    for m in row["methods"]:  # one ROC curve per method, named with its AUROC
        assert f"{m['method']} ({m['auroc']:.2f})" in view["legend"], (m["method"], view["legend"])
    assert "chance" in view["legend"]
    assert view["heatmap"] >= 1 and view["outlines"] >= len(row["circuit"]), view
    assert view["width"] > 300, view
