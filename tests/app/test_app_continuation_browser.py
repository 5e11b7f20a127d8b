"""Issue 39: the Why page's Continuation view in headless Chromium on smollm2.

- A 20-token continuation of a 12-token prompt: seconds from the click on "Explain a whole continuation" until its
  steps × tokens heatmap is painted (timed inside the page, :func:`tools.browser.timed`), written to
  ``continuation_latency.json`` with the machine's load, and asserted against ``NORMVIZ_CONT_DRAW_S`` when it is set
  (issue 39's bar is 3 s; it is not met yet: 4.68 s at load ~10, benchmarks/results/continuation_browser.json).
- A click on a cell of the heatmap's row 5 opens step 5: the candidates panel explains the step's position.
- The view in the dark theme (``theme=dark``): the heatmap's scale and masked cells are the dark twins
  (:mod:`normviz.viz.theme`); a screenshot goes to ``$NORMVIZ_SCREENSHOTS/continuation`` (else the test's tmp dir).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import quote_plus

import pytest

import normviz
from normviz.viz.theme import DARK_MASKED, DARK_MID
from normviz.viz.why import shown

from ..helpers.browser import app_in_chromium, emulate, require_browser, timed, wait_for_app, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]
NEW = "Yesterday the old fisherman walked slowly down to the harbour at"  # 12 smollm2 tokens
STEPS = 20
CHARTS = 6  # the Why page's own panels (candidates, sources, heads …)
HEAT = ".st-key-continuation"
DRAWN = f"return document.querySelectorAll('{HEAT} .hm image, {HEAT} .heatmaplayer image').length > 0;"
ROWS = (
    f"const gd = document.querySelector('{HEAT} .js-plotly-plot'); "
    "return gd && gd._fullData ? gd._fullData[0].z.length : 0;"
)
# the centre of cell (row, col) of the heatmap in the page's pixels, by plotly's own axis mapping (category axes:
# the k-th category sits at k), and the centre of its drag layer (where Selenium's offsets start)
_CELL = (
    """const gd = document.querySelector('"""
    + HEAT
    + """ .js-plotly-plot');
           if (!gd || !gd._fullLayout) return null;
           const L = gd._fullLayout, r = gd.getBoundingClientRect(),
             d = gd.querySelector('.nsewdrag').getBoundingClientRect();
           return {x: r.left + L._size.l + L.xaxis.l2p(arguments[1]), y: r.top + L._size.t + L.yaxis.l2p(arguments[0]),
                   cx: d.left + d.width / 2, cy: d.top + d.height / 2};"""
)
_TOGGLE = """return Array.from(document.querySelectorAll('[data-testid="stMain"] [data-testid="stCheckbox"] label'))
                  .find(l => l.innerText.includes(arguments[0])) || null;"""
_CAND = "((document.querySelector('.st-key-candidates .gtitle') || {}).textContent || '')"


def _click_cell(driver, row: int, col: int) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    chart = driver.find_element(By.CSS_SELECTOR, HEAT)
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", chart)
    wait_until(driver, DRAWN)
    p = driver.execute_script(_CELL, row, col)
    assert p is not None
    drag = driver.find_element(By.CSS_SELECTOR, f"{HEAT} .nsewdrag")
    ActionChains(driver).move_to_element_with_offset(
        drag, int(p["x"] - p["cx"]), int(p["y"] - p["cy"])
    ).click().perform()


def test_a_20_token_continuation_draws_opens_a_clicked_step_and_goes_dark(tmp_path):
    require_browser()
    out = Path(os.environ.get("NORMVIZ_SCREENSHOTS") or tmp_path) / "continuation"
    out.mkdir(parents=True, exist_ok=True)
    lm = normviz.load("smollm2")
    s = normviz.Session(lm, NEW)
    assert s.n_tokens == 12
    c = s.explain_continuation(STEPS)
    assert len(c) == STEPS
    bar = os.environ.get("NORMVIZ_CONT_DRAW_S")
    log = str(out / "streamlit.log")
    figures = {"load_average": open("/proc/loadavg").read().split()[:3], "prompt_tokens": 12, "steps": STEPS}
    with app_in_chromium(log, env={"NORMVIZ_TIMING": "1"}) as (url, driver):  # the shared server (its log linked)
        driver.get(f"{url}/Why?model=smollm2&text={quote_plus(NEW)}")
        state = wait_for_app(driver, min_charts=CHARTS)
        assert not state.get("timed_out") and not state["exceptions"], state
        assert not driver.execute_script(DRAWN)
        toggle = driver.execute_script(_TOGGLE, "Explain a whole continuation")
        assert toggle is not None
        shown_s, settled, server = timed(driver, log, toggle.click, DRAWN, timeout=300)
        figures["click to heatmap painted, s"] = round(shown_s, 3)
        figures["click to page idle, s"] = round(settled, 3)
        figures["server run(s), s"] = round(server, 3)
        print(json.dumps(figures))
        assert driver.execute_script(ROWS) == STEPS
        assert f"steps={STEPS}" in driver.current_url
        assert not driver.execute_script("return document.querySelectorAll('[data-testid=\"stException\"]').length")
        # step 0 first: the candidates after the prompt's last token
        pos0, pos5 = int(c.positions[0]), int(c.positions[5])
        wait_until(driver, f"return {_CAND}.includes('[{pos0}]');", timeout=300)
        # a click on row 5's first cell opens step 5
        _click_cell(driver, 5, 0)
        wait_until(driver, f"return {_CAND}.includes('[{pos5}]');", timeout=300)
        title = driver.execute_script(f"return {_CAND};")
        assert shown(c.columns[pos5]) in title, title
        assert f"position={pos5}" in driver.current_url
        focus = driver.execute_script(f"return document.querySelector('{HEAT} .js-plotly-plot').layout.meta.focus;")
        assert focus == 5
        driver.save_screenshot(str(out / "continuation_step5_light.png"))
        # the dark theme: the heatmap's scale and its masked cells are the dark twins
        emulate(driver, 1280, 800, "dark")
        driver.get(f"{url}/Why?model=smollm2&text={quote_plus(NEW)}&steps={STEPS}&theme=dark")
        wait_for_app(driver, min_charts=CHARTS + 1)
        wait_until(driver, DRAWN, timeout=300)
        look = driver.execute_script(f"""const gd = document.querySelector('{HEAT} .js-plotly-plot');
            return {{scale: JSON.stringify(gd._fullData[0].colorscale),
              masked: JSON.stringify(gd._fullData[1].colorscale),
                     bg: gd.layout.plot_bgcolor, page: getComputedStyle(document.body).backgroundColor}};""")
        assert DARK_MID in look["scale"] and DARK_MASKED in look["masked"] and look["bg"] == DARK_MASKED, look
        driver.execute_script(f"document.querySelector('{HEAT}').scrollIntoView({{block: 'start'}});")
        driver.save_screenshot(str(out / "continuation_dark.png"))
    figures["load_average_after"] = open("/proc/loadavg").read().split()[:3]
    (out / "continuation_latency.json").write_text(json.dumps(figures, indent=1))
    print(json.dumps(figures, indent=1))
    # a speed is a benchmark's figure, not a unit test's: reported always, asserted only against a bar one sets
    # (issue 39's 3 s is not met: 4.68 s at load ~10; on one thread the library's part is ~2.4 CPU s, the greedy
    # generation ~1.3 s of it at its floor (T + 1 one-token forwards), the batched backward pass ~0.9 s)
    if bar:
        assert figures["click to heatmap painted, s"] <= float(bar), figures
