"""Stage mode's side-by-side panels line up (issue 42, item 10), and Space's pause stops at the layer shown, in
headless Chromium: Overview's two grids (on stage at 1280 the Norm grid, its two-line unit beside it, was ~20 %
smaller than the α grid); the ‖f(x)‖ strips of Explore's model comparison (~37–48 px apart: only the left side
had its "What is this?" link); one extra layer drawn after Space paused (a step still on its way to the server)."""

from __future__ import annotations

import time
from urllib.parse import quote_plus

import pytest

from ..helpers.browser import SIZES, emulate, press_key, served_app, wait_for_app, wait_for_redraw, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1800)]
SENTENCE = "The cat sat on the mat because it was tired."
PLOTS = """const out = {};
for (const c of document.querySelectorAll(arguments[0])) {
  const k = c.className.match(/st-key-\\S+/)[0], a = c.querySelector('.hm image, .heatmaplayer image, .nsewdrag');
  if (a && !(k in out)) { const r = a.getBoundingClientRect(); out[k] = [r.left, r.top, r.width, r.height]; }
}
return out;"""

aligned = served_app("stage_align", "aligned")


def _open(driver, url: str, path: str, query: str, charts: int) -> None:
    driver.get(f"{url}{path}?{query}")
    state = wait_for_app(driver, min_charts=charts)
    assert not state.get("timed_out") and not state["exceptions"], state
    wait_for_redraw(driver, min_charts=charts)  # the column width is measured once and the page redrawn at it


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_overview_grids_side_by_side_share_one_plot_area(aligned, size):
    url, driver, out = aligned
    emulate(driver, *size, "light")
    _open(driver, url, "/Overview", "present=1&text=" + quote_plus(SENTENCE), 2)
    got = driver.execute_script(PLOTS, ".st-key-grid_attention, .st-key-grid_norm")
    driver.save_screenshot(str(out / f"overview_{size[0]}_grids.png"))
    a, b = got["st-key-grid_attention"], got["st-key-grid_norm"]
    assert b[0] > a[0] + a[2]  # side by side
    assert all(abs(x - y) <= 4 for x, y in zip(a[1:], b[1:])), got  # the same top, width and height


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_model_comparison_panels_and_strips_start_level(aligned, size):
    url, driver, out = aligned
    emulate(driver, *size, "light")
    _open(driver, url, "/", "present=1&compare=model&text=" + quote_plus(SENTENCE), 8)
    wait_until(driver, "return document.querySelectorAll('.st-key-fx_b_norm .nsewdrag').length > 0")
    got = driver.execute_script(PLOTS, '[class*="st-key-panel_"], [class*="st-key-fx_"]')
    driver.save_screenshot(str(out / f"compare_{size[0]}.png"))
    pairs = [(k, "st-key-" + k.removeprefix("st-key-").replace("_", "_b_", 1)) for k in got if "_b_" not in k]
    assert ("st-key-fx_norm", "st-key-fx_b_norm") in pairs, sorted(got)
    for left, right in pairs:
        assert abs(got[left][1] - got[right][1]) <= 4, (left, got[left], right, got[right])


SLOW_SOCKET = """if (!window.__nvSlow) {
  window.__nvSlow = true;  // every message to the server 1.5 s late (in order): a busy server's round trip
  const send = WebSocket.prototype.send;
  WebSocket.prototype.send = function (d) { setTimeout(() => send.call(this, d), 1500); };
}"""
SHOWN = """const g = document.querySelector('[class*="st-key-panel_"] .js-plotly-plot');
const m = /layer (\\d+)/.exec(g && g.layout && g.layout.title ? g.layout.title.text : '');
return m ? parseInt(m[1], 10) : null;"""
SLIDER = "return parseInt(document.querySelector('.st-key-w_layer input[type=\"range\"]').value, 10);"


def test_space_pauses_at_the_layer_shown_with_a_slow_server(aligned):
    """The lines view (no instant frames: each layer drawn by the server) with every message to the server 1.5 s
    late: Space plays, Space again once layer 2 is shown (before: the slider had run a step
    or two ahead, and those layers were drawn after the pause): the layer shown when Space was pressed stays."""
    url, driver, out = aligned
    emulate(driver, 1280, 800, "light")
    _open(driver, url, "/", "present=1&draw=lines&text=" + quote_plus(SENTENCE), 4)
    driver.execute_script(SLOW_SOCKET)
    driver.execute_script("document.activeElement && document.activeElement.blur();")
    press_key(driver, " ")
    wait_until(driver, SHOWN.replace("return m ?", "return m && parseInt(m[1], 10) >= 2 ?"), 60, idle=False)
    pause = "document.body.dispatchEvent(new KeyboardEvent('keydown', {key: ' ', bubbles: true, cancelable: true}));"
    shown = driver.execute_script(pause + SHOWN)  # Space and what is shown as it is pressed, in one script
    time.sleep(6)  # every step sent before the pause has reached the server and been drawn
    wait_for_app(driver, min_charts=4)
    driver.save_screenshot(str(out / "paused.png"))
    assert shown >= 2 and driver.execute_script(SHOWN) == shown and driver.execute_script(SLIDER) == shown, (
        shown,
        driver.execute_script(SHOWN),
        driver.execute_script(SLIDER),
    )
