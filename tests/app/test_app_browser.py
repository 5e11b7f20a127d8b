"""The real app in a real browser: `streamlit run app.py` on a free port, loaded in headless Chromium."""
from __future__ import annotations

import pytest

from ..helpers.browser import chromium, find_browser, streamlit_server, wait_for_app

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]


def _require_browser():
    pytest.importorskip("selenium", reason="selenium is not installed (pip install -r requirements-dev.txt)")
    if find_browser() is None:
        pytest.skip("no Chromium + chromedriver on this machine and none could be installed "
                    "(scripts/setup.sh runs `apt-get install chromium chromium-driver` when it is root)")


def test_explore_and_overview_render_in_chromium(tmp_path):
    _require_browser()
    with streamlit_server(log_path=str(tmp_path / "streamlit.log")) as url, chromium() as driver:
        driver.get(url + "/?layer=2")
        state = wait_for_app(driver, min_charts=4)
        driver.save_screenshot(str(tmp_path / "explore.png"))
        log = (tmp_path / "streamlit.log").read_text()
        assert state.get("exceptions") == 0, (state, log[-3000:])
        assert state.get("charts", 0) >= 4 and state.get("drawn", 0) >= 4, (state, log[-3000:])
        assert not [a for a in state.get("alerts", []) if a.strip()], state
        ticks = driver.execute_script(
            "return Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .ytick text'))"
            ".map(t => t.textContent);")
        assert "cat" in ticks and "[CLS]" in ticks
        assert "layer=2" in driver.current_url  # the view lives in the URL

        driver.get(url + "/Overview")
        state = wait_for_app(driver, min_charts=3)
        driver.save_screenshot(str(tmp_path / "overview.png"))
        assert state.get("exceptions") == 0 and state.get("charts", 0) >= 3, state
    assert (tmp_path / "explore.png").stat().st_size > 10_000
