"""Bounded memory for uploads, through a real server: a 50 MB one-line file on the Corpus page is refused in
under 2 s with under 200 MB extra server RSS, both from a browser (Streamlit's own check of
``server.maxUploadSize`` in .streamlit/config.toml) and from a client that ignores it (a chunked PUT straight
to the upload route of a live session: the server stops reading past the cap)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from tests.helpers.browser import chromium, find_browser, streamlit_server

pytestmark = [
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(find_browser() is None, reason="no chromium/chromedriver"),
]

SIZE = 50 * 2**20
RECORD_UPLOADS = """
window.__uploads = [];
const open = XMLHttpRequest.prototype.open;
XMLHttpRequest.prototype.open = function(method, url) { window.__uploads.push([method, String(url)]);
  return open.apply(this, arguments); };
const f = window.fetch;
window.fetch = function(u, o) { window.__uploads.push([(o && o.method) || 'GET', String(u.url || u)]);
  return f.apply(this, arguments); };
"""


def _server_rss(port: int) -> int:
    """RSS of the streamlit server listening on ``port`` and of its child processes, in bytes."""
    import psutil

    for p in psutil.Process().children(recursive=True):
        try:
            if "streamlit" in " ".join(p.cmdline()) and str(port) in p.cmdline():
                return p.memory_info().rss + sum(c.memory_info().rss for c in p.children(recursive=True))
        except psutil.Error:
            continue
    raise RuntimeError("server process not found")


class _Peak:
    """The largest server RSS seen while the block runs (sampled every 20 ms)."""

    def __init__(self, port: int):
        self.port, self.peak, self._stop = port, 0, threading.Event()

    def __enter__(self):
        def sample():
            while not self._stop.is_set():
                self.peak = max(self.peak, _server_rss(self.port))
                time.sleep(0.02)

        self._t = threading.Thread(target=sample, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def _open_uploader(driver, base: str):
    from selenium.webdriver.common.by import By

    driver.get(base + "/Corpus")
    deadline = time.time() + 180
    while time.time() < deadline:
        radios = [e for e in driver.find_elements(By.CSS_SELECTOR, "label") if e.text.strip() == "Upload a file"]
        if radios:
            radios[0].click()
            break
        time.sleep(0.2)
    while time.time() < deadline:
        inputs = driver.find_elements(By.CSS_SELECTOR, "input[type=file]")
        if inputs:
            return inputs[0]
        time.sleep(0.2)
    raise RuntimeError("no file uploader on the Corpus page")


def _wait_text(driver, needles, timeout: float) -> str | None:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        text = driver.execute_script("return document.body.innerText")
        hit = next((n for n in needles if n in text), None)
        if hit:
            return hit
        time.sleep(0.02)
    return None


def test_a_50_mb_one_line_upload_is_refused_fast_with_little_memory(tmp_path):
    import requests

    big = tmp_path / "big.txt"
    big.write_bytes(b"a" * SIZE)  # one line, no newline
    small = tmp_path / "small.txt"
    small.write_bytes(b"One short line.\n")
    figures = {}
    with streamlit_server() as base, chromium() as driver:
        port = int(base.rsplit(":", 1)[1])
        uploader = _open_uploader(driver, base)
        time.sleep(2)
        base_rss = _server_rss(port)
        # 1. a browser: refused by Streamlit's own check before anything is sent
        with _Peak(port) as peak:
            t0 = time.perf_counter()
            uploader.send_keys(str(big))
            hit = _wait_text(driver, ["or smaller", "too large", "is 50.0 MB"], timeout=10)
            browser_s = time.perf_counter() - t0
            time.sleep(0.5)
        figures["browser"] = {"refused_s": browser_s, "extra_rss_mb": (peak.peak - base_rss) / 2**20, "shown": hit}
        assert hit is not None, "no refusal shown"
        # 2. a client that ignores the browser's check: the URL of a real upload of this session, then 50 MB
        #    chunked (no Content-Length) straight to it
        driver.execute_script(RECORD_UPLOADS)
        uploader = (
            _open_uploader(driver, base)
            if not driver.find_elements("css selector", "input[type=file]")
            else driver.find_elements("css selector", "input[type=file]")[0]
        )
        driver.execute_script(RECORD_UPLOADS)
        uploader.send_keys(str(small))
        deadline = time.time() + 30
        urls = []
        while time.time() < deadline and not urls:
            urls = [
                u
                for m, u in (driver.execute_script("return window.__uploads || []") or [])
                if "upload_file" in u and m.upper() in ("PUT", "POST")
            ]
            time.sleep(0.1)
        assert urls, "the browser's upload request was not seen"
        target = urls[0] if urls[0].startswith("http") else base + urls[0]
        boundary = "normvizboundary"
        head = (
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.txt"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()

        def body():
            yield head
            chunk = b"a" * 2**20
            for _ in range(SIZE // len(chunk)):
                yield chunk
            yield f"\r\n--{boundary}--\r\n".encode()

        xsrf = {c["name"]: c["value"] for c in driver.get_cookies()}.get("_streamlit_xsrf", "")
        headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", "X-Xsrftoken": xsrf}
        base_rss = _server_rss(port)
        with _Peak(port) as peak:
            t0 = time.perf_counter()
            try:
                r = requests.put(
                    target,
                    data=body(),
                    timeout=30,
                    headers=headers,
                    cookies={"_streamlit_xsrf": xsrf} if xsrf else None,
                )
                status = r.status_code
            except requests.ConnectionError:  # the server may close the connection once past the cap
                status = "closed"
            else:
                figures["client_detail"] = r.text[:200]
            client_s = time.perf_counter() - t0
            time.sleep(0.5)
        figures["client"] = {"refused_s": client_s, "extra_rss_mb": (peak.peak - base_rss) / 2**20, "status": status}
    print("50 MB upload:", json.dumps(figures))
    assert figures["browser"]["refused_s"] < 2 and figures["browser"]["extra_rss_mb"] < 200
    assert status in (413, "closed"), status
    assert figures["client"]["refused_s"] < 2 and figures["client"]["extra_rss_mb"] < 200
