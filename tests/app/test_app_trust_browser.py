"""Issue 31: the Trust page in headless Chromium — it draws for a text, and the Spearman it shows for each
attribution equals the library's (``normviz.trust.faithfulness`` on that one text, the page's settings: no head
ablation, gradients, 16 IG steps), read from the page as a visitor sees it (4 decimals).

Stage mode draws the scores as an HTML table (``st.table``), whose cells are read here; the ordinary page draws a
``st.dataframe`` on a canvas, so there the test checks the page drew its chart and table without an error."""

from __future__ import annotations

import json
import math

import pytest

from ..helpers.browser import app_in_chromium, wait_for_app, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.timeout(600)]

TEXT = "The cat sat on the mat."
_TABLE = """
const t = document.querySelector('[data-testid="stTable"] table');
if (!t) return null;
const head = Array.from(t.querySelectorAll('thead th')).map(e => e.innerText.trim());
const rows = Array.from(t.querySelectorAll('tbody tr')).map(r =>
    Array.from(r.querySelectorAll('th, td')).map(e => e.innerText.trim()));
return {head: head, rows: rows};"""


def library_spearman() -> dict[str, float]:
    import normviz
    from normviz.trust import faithfulness
    from normviz.ui.views.trust import DEFAULT_KEYS

    lm = normviz.load("minilm")
    keys = [k for k in DEFAULT_KEYS if k in normviz.all_keys(lm)]
    f = faithfulness(lm, [TEXT], keys, heads=False, gradients=True, ig_steps=16)
    assert not f.skipped, f.skipped
    return {k: float(v[0]) for k, v in f.spearman.items()}


def test_trust_page_in_chromium_shows_the_librarys_spearman(tmp_path):
    query = "/Trust?model=minilm&text=" + TEXT.replace(" ", "+")
    log = tmp_path / "streamlit.log"
    with app_in_chromium(log, width=1920, height=1080) as (url, driver):
        driver.get(url + query)
        state = wait_for_app(driver, min_charts=1, timeout=300)
        driver.save_screenshot(str(tmp_path / "trust.png"))
        # the page's one alert is its verdict (st.info: "Here … tracks knockout best …"); any other is a failure
        alerts = state.get("alerts") or []
        others = [a for a in alerts if not a.startswith("Here ")]
        assert state.get("exceptions") == 0 and not others, (state, log.read_text()[-3000:])
        assert any("tracks knockout best" in a for a in alerts), alerts
        # the per-text table; the known-circuits table lives in its own (closed) expander
        assert (
            driver.execute_script(
                "return Array.from(document.querySelectorAll('[data-testid=\"stDataFrame\"]'))"
                ".filter(e => !e.closest('[data-testid=\"stExpander\"]')).length"
            )
            == 1
        )
        titles = driver.execute_script(
            'return Array.from(document.querySelectorAll(\'[data-testid="stPlotlyChart"]'
            " .legendtext')).map(e => e.textContent);"
        )
        assert "knockout" in titles, titles  # the ground truth beside the attributions

        driver.get(url + query + "&present=1")
        wait_for_app(driver, min_charts=1, timeout=300)
        wait_until(driver, "return document.querySelector('[data-testid=\"stTable\"] table') !== null", 120)
        table = driver.execute_script(_TABLE)
        driver.save_screenshot(str(tmp_path / "trust_stage.png"))
    head, rows = table["head"], table["rows"]
    from normviz.ui.views.trust import SCORE_NAMES, method_name

    assert head[:2] == [SCORE_NAMES["attribution"], SCORE_NAMES["spearman"]], json.dumps(table)[:2000]
    shown = {r[0]: r[1] for r in rows}  # rows are named as the page names them (method_name of each key)
    lib = {method_name(k): v for k, v in library_spearman().items()}
    assert set(shown) == set(lib), (sorted(shown), sorted(lib))
    for key, value in lib.items():
        if math.isnan(value):
            assert shown[key] in ("", "None", "nan", "NaN", "<NA>"), (key, shown[key])
        else:
            assert float(shown[key]) == pytest.approx(value, abs=5e-5 + 1e-12), (key, shown[key], value)
