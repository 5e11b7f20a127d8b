"""Overview's colour bars sit beside their grids (issue 42, seen in the screenshot pass), in headless Chromium: a tall
grid (smollm2: 30 layers of 9 heads) is held by the figure's height, so its squares took ~390 px of a plot area as
wide as the column (normal mode) or of 520 px at least (stage): plotly puts the bar at the area's right edge, up to
~600 px from the squares."""

from __future__ import annotations

from urllib.parse import quote_plus

import pytest

from ..helpers.browser import emulate, served_app, wait_drawn

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1200)]
SENTENCE = "The cat sat on the mat because it was tired."
GAPS = """const out = {};
for (const c of document.querySelectorAll('.st-key-grid_attention, .st-key-grid_norm')) {
  const k = c.className.match(/st-key-\\S+/)[0], sq = c.querySelector('.hm image'), bar = c.querySelector('.colorbar');
  if (sq && bar) out[k] = bar.getBoundingClientRect().left - sq.getBoundingClientRect().right;
}
return out;"""

bars = served_app("grid_bar", "bars")


@pytest.mark.parametrize("mode", ["normal", "stage"])
@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_overview_colour_bar_sits_beside_a_tall_grid(bars, mode, size):
    url, driver, out = bars
    emulate(driver, *size, "light")
    q = "model=smollm2&text=" + quote_plus(SENTENCE) + ("&present=1" if mode == "stage" else "")
    driver.get(f"{url}/Overview?{q}")
    state = wait_drawn(driver, min_charts=2, timeout=600)
    assert not state["exceptions"], state
    gaps = driver.execute_script(GAPS)
    driver.save_screenshot(str(out / f"overview_{mode}_{size[0]}.png"))
    assert len(gaps) == 2 and all(0 <= g <= 60 for g in gaps.values()), gaps
