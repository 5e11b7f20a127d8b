"""A text typed while the app's server is away is not lost (issue 42; docs/deployment-memory.md says nothing typed is
lost): the visitor types a new text while the server does not answer, the server is killed (kill -9) and started
again on its port, and the reconnected page (a new session, which reruns from the URL) draws the typed text. The
server writes the URL only after a run, and the typed text reached none: the page reran from the URL's older text,
with no note. Now the browser writes what is typed into the URL at each keystroke (components/url_text.js)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.parse

import pytest

from ..helpers.browser import ROOT, chromium, free_port, require_browser, wait_for_app

pytestmark = [pytest.mark.browser, pytest.mark.timeout(900)]
OLD = "The old text was in the link."
NEW = "Zebras typed this during the outage."


def _server(port: int, log) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            "app.py",
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
            "--server.fileWatcherType",
            "none",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _listening(port: int, timeout: float = 120) -> None:
    import socket

    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"nothing listens on {port}")


def _labels(driver) -> str:
    return driver.execute_script("""return Array.from(document.querySelectorAll(
        '[data-testid="stPlotlyChart"] .js-plotly-plot')).map(g => JSON.stringify((g.data || []).map(t => [t.x, t.y])))
        .join(' ');""")


def _query_text(driver) -> list[str] | None:
    return urllib.parse.parse_qs(urllib.parse.urlparse(driver.current_url).query).get("text")


def _boxes(driver) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('.st-key-w_text input')).map(i => i.value);"
    )


def test_a_text_typed_while_the_server_is_away_survives_its_restart(tmp_path):
    require_browser()
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "server.log", "w") as log:
        procs = [_server(port, log)]
        try:
            _listening(port)
            with chromium(1280, 900) as driver:
                driver.get(url + "/?model=minilm&text=" + urllib.parse.quote_plus(OLD))
                state = wait_for_app(driver, min_charts=2, timeout=300)
                assert not state.get("timed_out") and state["exceptions"] == 0, state
                assert "link" in _labels(driver) and "during" not in _labels(driver)
                os.kill(procs[0].pid, signal.SIGSTOP)  # the server stops answering (its connection stays open)
                box = driver.find_element(By.CSS_SELECTOR, ".st-key-w_text input")
                box.send_keys(Keys.CONTROL, "a")
                box.send_keys(NEW)
                box.send_keys(Keys.ENTER)  # the rerun it asks for goes to the stopped server: it never runs
                deadline = time.time() + 30
                while _query_text(driver) != [NEW] and time.time() < deadline:
                    time.sleep(0.1)
                assert _query_text(driver) == [NEW], driver.current_url  # written by the browser, not the server
                os.kill(procs[0].pid, signal.SIGKILL)
                procs[0].wait(30)
                procs.append(_server(port, log))  # started again on its port, as scripts/serve_many.sh does
                _listening(port)
                deadline, seen = time.time() + 300, None
                while time.time() < deadline:  # the page reconnects (a new session) and reruns
                    seen = (_boxes(driver), _labels(driver), driver.current_url)
                    if "during" in seen[1] or ("link" in seen[1] and seen[0] == [OLD]):
                        break
                    time.sleep(0.25)
                state = wait_for_app(driver, min_charts=2, timeout=300)
                seen = (_boxes(driver), _labels(driver), driver.current_url)
                assert state["exceptions"] == 0, state
                assert "during" in seen[1] and "link" not in seen[1], seen  # the typed text drawn, not the link's
                assert seen[0] == [NEW], seen
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait(10)
