"""The real app in a real browser: `streamlit run app.py` on a free port, loaded in headless Chromium.

``test_redraw_latency_page_switching_and_screenshots`` measures what a visitor waits for (layer, head and map
changes of an analysed text, a new short sentence; ``NORMVIZ_LATENCY_ROUNDS`` rounds, 4 by default), clicks through
every page in the sidebar checking that the text stays, and saves a screenshot of every page, the pages taking the
sizes (1280×800, 1920×1080) and modes (light, dark, presentation light and dark) in turn so each size and mode is
drawn (into ``$NORMVIZ_SCREENSHOTS`` when set, else the test's tmp dir). Figures go to ``latency.json`` there and
to stdout. The medians over more rounds are benchmarks/bench_browser.py's; every page × size × mode is
scripts/screenshots.py's (tools.browser.screenshots).
"""

from __future__ import annotations

import json
import os

import pytest

from ..helpers.browser import (
    EXPLORE_TEXT,
    MODES,
    SHOT_PAGES,
    SIZES,
    app_in_chromium,
    click_nav,
    measure_explore,
    require_browser,
    screenshots,
    shots_dir,
    streamlit_floor,
    streamlit_server,
    text_inputs,
    wait_for_app,
    wait_until,
)

pytestmark = [pytest.mark.browser, pytest.mark.timeout(1500)]
TEXT = EXPLORE_TEXT


def test_explore_and_overview_render_in_chromium(tmp_path):
    with app_in_chromium(tmp_path / "streamlit.log") as (url, driver):
        driver.get(url + "/?layer=2")
        state = wait_for_app(driver, min_charts=4)
        driver.save_screenshot(str(tmp_path / "explore.png"))
        log = (tmp_path / "streamlit.log").read_text()
        assert state.get("exceptions") == 0, (state, log[-3000:])
        assert state.get("charts", 0) >= 4 and state.get("drawn", 0) >= 4, (state, log[-3000:])
        assert not [a for a in state.get("alerts", []) if a.strip()], state
        ticks = driver.execute_script(
            "return Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .ytick text'))"
            ".map(t => t.textContent);"
        )
        assert "cat" in ticks and "[CLS]" in ticks
        assert "layer=2" in driver.current_url  # the view lives in the URL

        driver.get(url + "/Overview")
        state = wait_for_app(driver, min_charts=3)
        driver.save_screenshot(str(tmp_path / "overview.png"))
        assert state.get("exceptions") == 0 and state.get("charts", 0) >= 3, state
    assert (tmp_path / "explore.png").stat().st_size > 10_000


def test_redraw_latency_page_switching_and_screenshots(tmp_path):
    require_browser()
    out = shots_dir(tmp_path)
    log = str(out / "streamlit.log")
    with (
        streamlit_server(script="benchmarks/apps/bare_slider.py", log_path=str(out / "bare.log")) as bare,
        app_in_chromium(log, env={"NORMVIZ_TIMING": "1"}) as (url, driver),
    ):
        rounds = int(os.environ.get("NORMVIZ_LATENCY_ROUNDS", "4"))
        floor = streamlit_floor(driver, bare, rounds)  # Streamlit itself on this machine now
        figures = {"streamlit_floor_s": round(floor, 3), **measure_explore(driver, url, log, rounds)}
        (out / "latency.json").write_text(json.dumps(figures, indent=1))
        print(json.dumps(figures, indent=1))

        # every page through the sidebar keeps the text (and the URL says it)
        driver.get(url + "/?layer=2&text=" + TEXT.replace(" ", "+"))
        wait_for_app(driver, min_charts=4)
        for page, want_chart in (("Overview", 2), ("Learn", 1), ("Corpus", 0), ("Explore", 4), ("Overview", 2)):
            click_nav(driver, page)
            wait_until(
                driver, f"return window.location.pathname.endsWith({json.dumps('' if page == 'Explore' else page)})"
            )
            wait_for_app(driver, min_charts=want_chart)
            keeps = "return window.location.search.includes('text=Dogs') && window.location.search.includes('layer=2')"
            if page != "Corpus":
                keeps += (
                    ' && Array.from(document.querySelectorAll(\'[data-testid="stMain"] '
                    '[data-testid="stTextInput"] input\')).some(i => i.value === ' + json.dumps(TEXT) + ")"
                )
            try:
                wait_until(driver, keeps + ";", timeout=90)
            except TimeoutError:
                raise AssertionError((page, driver.current_url, text_inputs(driver))) from None
            assert not driver.execute_script("return document.querySelectorAll('[data-testid=\"stException\"]').length")

        shots = []  # every page once, the sizes and modes in turn (all of each drawn)
        for i, page in enumerate(SHOT_PAGES):
            size, mode = SIZES[i % len(SIZES)], MODES[i % len(MODES)]
            q = "text=" + TEXT.replace(" ", "+")
            shots += screenshots(driver, url, out / "screenshots", query=q, pages=[page], sizes=[size], modes=[mode])
    assert len(shots) == len(SHOT_PAGES) and all(f.stat().st_size > 10_000 for f in shots)
    assert {f.stem.split("_", 1)[1] for f in shots} >= {f"{w}x{h}_{m}" for (w, h), m in zip(SIZES * 2, MODES)}
    # against the floor measured in the same run (a bare page redrawing four heatmaps), so a loaded machine
    # does not fail it: on a quiet one the floor is ~0.1 s
    bound = float(os.environ.get("NORMVIZ_REDRAW_BOUND_X", "10")) * floor
    assert figures["layer change"]["shown_median_s"] < bound and figures["map on"]["median_s"] < bound, figures
    # the panels drawn in the browser at once are the server's numbers (frames hold 4 significant digits)
    assert figures["instant_vs_server_max_rel"] < 1e-3, figures


def test_a_deep_link_to_a_fresh_server_names_the_pages():
    """A shared link's first request on a fresh server runs app.py's st.navigation (no Streamlit `pages/`
    folder to auto-discover: that showed an 'app' entry and ran the page without the router)."""
    with app_in_chromium(fresh=True) as (url, driver):
        driver.get(url + "/Overview")
        wait_for_app(driver, min_charts=0)
        wait_until(driver, "return document.querySelectorAll('[data-testid=\"stSidebarNav\"] a').length >= 5;")
        items = driver.execute_script(
            "return Array.from(document.querySelectorAll("
            '\'[data-testid="stSidebarNav"] a span[data-testid="stSidebarNavLink"], '
            '[data-testid="stSidebarNav"] a\')).map(a => a.innerText.trim())'
        )
    names = [t.split("\n")[-1] for t in items]
    assert "app" not in names and {"Explore", "Overview", "Learn", "Corpus", "Translate"} <= set(names), items
