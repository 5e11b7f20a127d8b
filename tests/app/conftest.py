"""Every app test runs offline, without a deployment's allowlist or token cap from the environment."""

import pytest

from ..helpers import why
from ..helpers.app import app, no_exception


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("NORMVIZ_ALLOWED_MODELS", raising=False)
    monkeypatch.delenv("NORMVIZ_MAX_TOKENS", raising=False)


@pytest.fixture
def at():
    """Explore (app.py) on its default view, run once."""
    a = app()
    a.run()
    no_exception(a)
    return a


@pytest.fixture(scope="module")
def why_page():
    """The Why page on smollm2 for :data:`tests.helpers.why.TEXT`, run once per module."""
    a = app(why.PAGE, {"model": "smollm2", "text": why.TEXT})
    a.run()
    return a


@pytest.fixture(scope="package", autouse=True)
def _shared_app_server():
    """The app server and Chromium the browser tests share (tests/helpers/browser.py: app_in_chromium) stop after
    the last test of tests/app, not at the end of the whole run (it holds the models it loaded)."""
    yield
    from ..helpers.browser import stop_shared_app

    stop_shared_app()
