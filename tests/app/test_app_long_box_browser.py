"""The long view in a real browser (issue 20): a box drawn on an overview moves the zoom window there (plotly's
box selection, read by the page on the rerun it triggers). minilm, ~320 tokens, NORMVIZ_MAX_TOKENS=400."""

from __future__ import annotations

import pytest

from ..helpers.browser import app_in_chromium, wait_for_app, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
TEXT = ("The river rose in the night and the town woke to water in the streets. " * 19).strip()
WINDOWS = """return Array.from(document.querySelectorAll('[class*="st-key-zoom_"] .js-plotly-plot'))
  .map(g => (g.layout.meta || {}).window);"""


def test_a_box_on_an_overview_moves_the_zoom_window(tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    log = str(tmp_path / "streamlit.log")
    with app_in_chromium(log, env={"NORMVIZ_MAX_TOKENS": "400"}, height=900) as (url, driver):
        driver.get(url + "/?maps=norm&text=" + TEXT.replace(" ", "+"))
        state = wait_for_app(driver, min_charts=2, timeout=300)
        assert state.get("exceptions") == 0, (state, open(log).read()[-2000:])
        wait_until(driver, "const w = " + WINDOWS.replace("return ", "") + " return w.length === 1 && !!w[0];")
        wait_for_app(driver, min_charts=2)
        assert driver.execute_script(WINDOWS) == [[0, 64, 0, 64]]
        plot = driver.find_element(By.CSS_SELECTOR, '[class*="st-key-ov_norm"] .nsewdrag')
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", plot)
        w, h = plot.size["width"], plot.size["height"]
        # from ~60 % to ~80 % of the axes, in both directions (token positions ~190 … ~255 of ~320)
        chain = ActionChains(driver)
        chain.move_to_element_with_offset(plot, int(0.1 * w), int(0.1 * h)).click_and_hold()
        chain.move_by_offset(int(0.1 * w), int(0.1 * h)).move_by_offset(int(0.1 * w), int(0.1 * h)).release()
        chain.perform()
        wait_until(
            driver,
            "const w = " + WINDOWS.replace("return ", "") + " return w.length === 1 && w[0] && w[0][0] > 150;",
            timeout=120,
        )
        ((r0, r1, c0, c1),) = driver.execute_script(WINDOWS)
        assert 150 < r0 < r1 <= 330 and 150 < c0 < c1 <= 330, (r0, r1, c0, c1)
        assert not driver.execute_script("return document.querySelectorAll('[data-testid=\"stException\"]').length")
