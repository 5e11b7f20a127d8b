"""Issue 42 items 2 and 5 in Chromium: Esc on every stage page returns to the normal page without an error, on
every embedded self-attention model. On 4c42c33 Esc did nothing on Overview, Learn, Trust and Corpus (no stage
keyboard there) and on the Why page replaced everything from the graph down with
StreamlitValueAssignmentNotAllowedError (its graph download's key set again). Screenshots after each Esc go to
``$NORMVIZ_SCREENSHOTS/escape`` (else the test's tmp dir)."""

from __future__ import annotations

from urllib.parse import quote_plus

import pytest

from ..helpers.browser import emulate, press_key, served_app, wait_for_app, wait_until
from .models import MODELS

pytestmark = [pytest.mark.browser, pytest.mark.timeout(3600)]
TEXT = "The capital of France is"
# page path → charts it draws on stage (Corpus draws none before Run)
PAGES = {"/": 2, "/Why": 2, "/Overview": 1, "/Learn": 1, "/Trust": 1, "/Corpus": 0}
ERRORS = """return {exceptions: document.querySelectorAll('[data-testid="stException"]').length,
                    wrong: Array.from(document.querySelectorAll('[data-testid="stAlert"]'))
                           .map(e => e.innerText).filter(t => t.includes('Something went wrong'))};"""
served = served_app("escape", "served")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("path", list(PAGES))
def test_escape_leaves_stage_on_every_page(served, path, model):
    url, driver, out = served
    emulate(driver, 1280, 800, "light")
    driver.get(f"{url}{path}?present=1&model={model}&text={quote_plus(TEXT)}")
    state = wait_for_app(driver, min_charts=PAGES[path], timeout=900)
    assert not state.get("timed_out"), (path, model, state)
    wait_until(
        driver, "return document.querySelectorAll('iframe, [class*=\"st-key-nv_stage_keys\"]').length > 0", timeout=60
    )
    assert driver.execute_script(ERRORS) == {"exceptions": 0, "wrong": []}, (path, model, "on stage")
    press_key(driver, "\ue00c")  # Esc
    wait_until(driver, "return !window.location.search.includes('present=1');", timeout=60)
    state = wait_for_app(driver, min_charts=PAGES[path], timeout=900)
    name = path.strip("/") or "Explore"
    driver.save_screenshot(str(out / f"{name}_{model}_after_escape.png"))
    assert not state.get("timed_out"), (path, model, state)
    assert driver.execute_script(ERRORS) == {"exceptions": 0, "wrong": []}, (path, model, "after Esc")
    assert "present=1" not in driver.current_url
