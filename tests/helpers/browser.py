"""The browser helpers (a Streamlit server, headless Chromium, timings): :mod:`tools.browser`; and the set-up every
browser test of the app shares: :func:`app_in_chromium` (one test) and :func:`served_app` (one file's tests)."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tools.browser import *  # noqa: F401,F403
from tools.browser import (  # noqa: F401
    _IDLE,
    _TITLES,
    _WATCH,
    ROOT,
    chromium,
    emulate,
    require_browser,
    streamlit_server,
)

SHARED_ENV = {"NORMVIZ_TIMING": "1"}  # the shared server's environment (timing lines in its log change nothing else)
_shared: dict = {}


@contextlib.contextmanager
def app_in_chromium(log_path=None, env: dict | None = None, width: int = 1280, height: int = 800, fresh: bool = False):
    """The real app in a real browser: skips the test (saying why) where there is no Chromium, else yields (the
    app's URL, the driver) with a ``width`` × ``height`` viewport in the light scheme on a blank page.

    By default the app server and Chromium are the ones the browser tests of tests/app share (started by the first
    such test, stopped after the last: :func:`stop_shared_app`), and ``log_path`` links to the shared server's log;
    a test gets its own ``streamlit run app.py`` on a free port and its own Chromium, both stopped after it, with
    ``fresh`` (a first request on a fresh server) or an ``env`` beyond :data:`SHARED_ENV` (added to its
    environment, its output to ``log_path``)."""
    require_browser()
    if fresh or any(SHARED_ENV.get(k) != v for k, v in (env or {}).items()):
        with (
            streamlit_server(env=env, log_path=None if log_path is None else str(log_path)) as url,
            chromium(width, height) as driver,
        ):
            yield url, driver
        return
    url, driver, log = _shared_app(width, height)
    driver.get("about:blank")
    emulate(driver, width, height, "light")
    if log_path is not None:  # a log left by an earlier run (NORMVIZ_SCREENSHOTS) is replaced
        Path(log_path).unlink(missing_ok=True)
        Path(log_path).symlink_to(log)
    yield url, driver


def _shared_app(width: int, height: int):
    """(url, driver, log) of the shared app server and Chromium, started on first use, or again when its Chromium
    stopped answering (one crash does not fail every later test)."""
    got = _shared.get("app")
    if got is not None:
        try:
            got[1].execute_script("return 1;")
        except Exception:
            stop_shared_app()
            got = None
    if got is None:
        stack = contextlib.ExitStack()
        folder = tempfile.mkdtemp(prefix="normviz-shared-app-")
        stack.callback(shutil.rmtree, folder, ignore_errors=True)
        log = Path(folder) / "streamlit.log"
        try:
            url = stack.enter_context(streamlit_server(env=SHARED_ENV, log_path=str(log)))
            driver = stack.enter_context(chromium(width, height))
        except BaseException:
            stack.close()
            raise
        _shared.update(app=(url, driver, log), stack=stack)
        got = _shared["app"]
    return got


def stop_shared_app() -> None:
    """Stop the shared app server and Chromium, if started (tests/app/conftest.py, after the last test there)."""
    stack = _shared.pop("stack", None)
    _shared.pop("app", None)
    if stack is not None:
        stack.close()


atexit.register(stop_shared_app)


def shots_dir(fallback, name: str = "") -> Path:
    """Where a browser test's screenshots go: ``$NORMVIZ_SCREENSHOTS/<name>`` when that is set, else
    ``<fallback>/<name>`` (the test's tmp dir); made."""
    out = Path(os.environ.get("NORMVIZ_SCREENSHOTS") or fallback) / name
    out.mkdir(parents=True, exist_ok=True)
    return out


def served_app(name: str, fixture: str | None = None, width: int = 1280, height: int = 800):
    """A module-scoped fixture for a file whose tests share one app server and one Chromium (the shared ones of
    :func:`app_in_chromium`): it yields (url, driver, out), ``out`` the screenshots' folder :func:`shots_dir`
    ``(…, name)``, where the server's log is ``streamlit.log``. Its name is ``fixture`` (default ``name``); assign
    it at module level under that name: ``stage = served_app("stage")``."""

    @pytest.fixture(scope="module", name=fixture or name)
    def served(tmp_path_factory):
        require_browser()
        out = shots_dir(tmp_path_factory.mktemp("shots"), name)
        with app_in_chromium(out / "streamlit.log", width=width, height=height) as (url, driver):
            yield url, driver, out

    return served
