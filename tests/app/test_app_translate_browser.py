"""The Translate page in headless Chromium: charts drawn, special tokens shown literally (not eaten as markup)."""

from __future__ import annotations

import pytest

from ..helpers.browser import app_in_chromium, wait_for_app

pytestmark = [pytest.mark.browser, pytest.mark.timeout(420)]


def test_translate_renders_in_chromium(tmp_path):
    with app_in_chromium(tmp_path / "streamlit.log") as (url, driver):
        driver.get(url + "/Translate?src=the+cat+sees+a+dog&tgt=mao+vidas+un+inu&layer=1")
        state = wait_for_app(driver, min_charts=2)
        driver.save_screenshot(str(tmp_path / "translate.png"))
        log = (tmp_path / "streamlit.log").read_text()
        assert state.get("exceptions") == 0, (state, log[-3000:])
        assert state.get("charts", 0) >= 3 and state.get("drawn", 0) >= 2, (state, log[-3000:])  # 2 heatmaps + links
        ticks = driver.execute_script(
            "return Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .xtick text'))"
            ".map(t => t.textContent);"
        )
        assert "cat" in ticks and "</s>" in ticks, ticks  # the source eos, escaped for plotly, drawn as is
        words = driver.execute_script(
            "return Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .textpoint text'))"
            ".map(t => t.textContent);"
        )
        assert {"the", "cat", "mao", "inu"} <= set(words), words
        assert "layer=1" in driver.current_url
