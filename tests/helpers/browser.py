"""Drive the real app in headless Chromium (Debian's chromium + chromedriver, through Selenium).

Used by tests/app/test_app_browser.py and scripts/screenshots.py (through the shim tests/browser.py).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = [os.environ.get("NORMVIZ_CHROMIUM", ""), "/usr/bin/chromium", "/usr/bin/chromium-browser",
            "/usr/bin/google-chrome"]
DRIVERS = [os.environ.get("NORMVIZ_CHROMEDRIVER", ""), "/usr/bin/chromedriver", shutil.which("chromedriver") or ""]
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


def find_browser() -> tuple[str, str] | None:
    browser = next((p for p in CHROMIUM if p and os.path.exists(p)), None)
    driver = next((p for p in DRIVERS if p and os.path.exists(p)), None)
    return (browser, driver) if browser and driver else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: dict | None = None, script: str = "app.py", log_path: str | None = None):
    """Start ``streamlit run app.py`` on a free local port; yield its base URL; stop it afterwards."""
    port = free_port()
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **(env or {})}
    log = open(log_path or os.devnull, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", script, "--server.port", str(port), "--server.address",
         "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env=full_env, stdout=log, stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"streamlit exited with code {proc.returncode}")
            with contextlib.suppress(OSError):
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            time.sleep(0.3)
        else:
            raise RuntimeError("streamlit did not start listening within 60 s")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@contextlib.contextmanager
def chromium(width: int = 1280, height: int = 800):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = find_browser()
    if found is None:
        raise RuntimeError("no chromium/chromedriver found")
    browser, driver_path = found
    profile = tempfile.mkdtemp(prefix="normviz-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for f in FLAGS + [f"--user-data-dir={profile}", f"--window-size={width},{height}"]:
        opts.add_argument(f)
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    try:
        set_viewport(driver, width, height)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for_app(driver, min_charts: int = 1, timeout: float = 180) -> dict:
    """Wait until at least ``min_charts`` plotly charts have drawn and the app stopped running."""
    deadline = time.time() + timeout
    state = {}
    while time.time() < deadline:
        state = driver.execute_script("""
            return {
              charts: document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg').length > 0 ?
                      document.querySelectorAll('[data-testid="stPlotlyChart"]').length : 0,
              drawn: document.querySelectorAll('[data-testid="stPlotlyChart"] .heatmaplayer image, [data-testid="stPlotlyChart"] .hm image').length,
              exceptions: document.querySelectorAll('[data-testid="stException"]').length,
              alerts: Array.from(document.querySelectorAll('[data-testid="stAlert"]')).map(e => e.innerText),
              running: document.querySelectorAll('[data-testid="stStatusWidget"]').length,
              skeleton: document.querySelectorAll('[data-testid="stSkeleton"]').length,
            };""")
        if state["exceptions"] or (state["charts"] >= min_charts and not state["running"] and not state["skeleton"]):
            time.sleep(1.5)  # let plotly finish laying out
            return state
        time.sleep(0.5)
    return state


def set_viewport(driver, width: int = 1280, height: int = 800) -> None:
    """An exact CSS viewport (the window size would include browser chrome)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def page_height(driver) -> int:
    return int(driver.execute_script("""
        const m = document.querySelector('[data-testid="stMain"]') || document.body;
        return Math.max(m.scrollHeight, document.body.scrollHeight);"""))
