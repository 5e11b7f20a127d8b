"""The browser helpers (a Streamlit server, headless Chromium, timings): :mod:`tools.browser`; and the set-up every
browser test of the app shares: :func:`app_in_chromium` (one test) and :func:`served_app` (one file's tests)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from tools.browser import *  # noqa: F401,F403
from tools.browser import _IDLE, _TITLES, _WATCH, ROOT, chromium, require_browser, streamlit_server  # noqa: F401


@contextlib.contextmanager
def app_in_chromium(log_path=None, env: dict | None = None, width: int = 1280, height: int = 800):
    """The real app in a real browser: skips the test (saying why) where there is no Chromium, else ``streamlit
    run app.py`` on a free port (``env`` added to its environment, its output to ``log_path``) and headless
    Chromium with a ``width`` × ``height`` viewport; yields (the app's URL, the driver), both stopped after."""
    require_browser()
    with (
        streamlit_server(env=env, log_path=None if log_path is None else str(log_path)) as url,
        chromium(width, height) as driver,
    ):
        yield url, driver


def shots_dir(fallback, name: str = "") -> Path:
    """Where a browser test's screenshots go: ``$NORMVIZ_SCREENSHOTS/<name>`` when that is set, else
    ``<fallback>/<name>`` (the test's tmp dir); made."""
    out = Path(os.environ.get("NORMVIZ_SCREENSHOTS") or fallback) / name
    out.mkdir(parents=True, exist_ok=True)
    return out


def served_app(name: str, fixture: str | None = None, width: int = 1280, height: int = 800):
    """A module-scoped fixture for a file whose tests share one app server and one Chromium: it yields (url,
    driver, out), ``out`` the screenshots' folder :func:`shots_dir` ``(…, name)``, where the server's log is
    ``streamlit.log``. Its name is ``fixture`` (default ``name``); assign it at module level under that name:
    ``stage = served_app("stage")``."""

    @pytest.fixture(scope="module", name=fixture or name)
    def served(tmp_path_factory):
        require_browser()
        out = shots_dir(tmp_path_factory.mktemp("shots"), name)
        with app_in_chromium(out / "streamlit.log", width=width, height=height) as (url, driver):
            yield url, driver, out

    return served
