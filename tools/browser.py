"""Drive the real app in headless Chromium (Debian's chromium + chromedriver, through Selenium).

Used by tests/app/test_app_browser.py (through tests/helpers/browser.py), scripts/screenshots.py and the
browser benchmarks (benchmarks/bench_browser.py, bench_two_visitors.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from normviz.core import settings

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = [
    settings.env_raw("NORMVIZ_CHROMIUM") or "",
    "/usr/bin/chromium",
    "/usr/bin/chromium-browser",
    "/usr/bin/google-chrome",
]
DRIVERS = [settings.env_raw("NORMVIZ_CHROMEDRIVER") or "", "/usr/bin/chromedriver", shutil.which("chromedriver") or ""]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
]


def find_browser() -> tuple[str, str] | None:
    browser = next((p for p in CHROMIUM if p and os.path.exists(p)), None)
    driver = next((p for p in DRIVERS if p and os.path.exists(p)), None)
    return (browser, driver) if browser and driver else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def streamlit_server(env: dict | None = None, script: str = "app.py", log_path: str | None = None, attempts: int = 3):
    """Start ``streamlit run app.py`` on a free local port; yield its base URL; stop it afterwards.

    The port is free when chosen but another process (other test runs share the machine) may take it before
    Streamlit binds it; Streamlit then exits at once, and the server is started again on another port
    (``attempts`` times in all)."""
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **(env or {})}
    log = open(log_path or os.devnull, "w")
    proc = None
    try:
        for attempt in range(attempts):
            port = free_port()
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RUN_THEN_EXIT,
                    "run",
                    script,
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
                env=full_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: the server and its heavy-maps workers
            )
            if _listening(proc, port, time.time() + 60):
                break
            if proc.poll() is None:
                raise RuntimeError("streamlit did not start listening within 60 s")
            if attempt == attempts - 1:
                raise RuntimeError(f"streamlit exited with code {proc.returncode} ({attempts} ports tried)")
        yield f"http://127.0.0.1:{port}"
    finally:
        if proc is not None:
            stop_group(proc)
        log.close()


# ``python -m streamlit``, except that once its shutdown has run (SIGTERM: sessions closed, event loop ended,
# threads joined, every other atexit handler run) the process ends at once: the interpreter's own teardown of a
# server that loaded models (freeing millions of objects) took 5-8 s of a stop on a loaded 2-core machine, and
# the old 10 s wait before a kill made each stop of a test's server cost 10-14 s. Registered first, so run last.
_RUN_THEN_EXIT = """
import atexit, os, runpy, sys
code = [1]
def _exit_now():
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    os._exit(code[0])
atexit.register(_exit_now)
try:
    runpy.run_module("streamlit", run_name="__main__", alter_sys=True)
    code[0] = 0
except SystemExit as e:
    code[0] = e.code if isinstance(e.code, int) else int(e.code is not None)
    raise
"""


def stop_group(proc: subprocess.Popen, grace: float = 10.0, reap: float = 10.0) -> None:
    """Stop a server started with ``start_new_session``: SIGTERM to it (its own shutdown stops its sessions), up
    to ``grace`` s to end, then SIGKILL to its whole process group: what is left of it (a hung server, a
    heavy-maps worker it started) ends too, and no orphan stays behind. Returns once no process of the group runs
    (a killed process takes a moment to free its memory on a loaded machine; a zombie left for init to reap holds
    none), or after ``reap`` s more."""
    import signal

    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(grace)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + reap
    while group_running(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)


def group_running(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs (zombies, which hold no memory, do not count)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):  # pragma: no cover - not Linux: a zombie counts
        return True
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):
            text = stat.read_text()
            state, _ppid, group = text[text.rindex(")") + 2 :].split()[:3]
            if state != "Z" and int(group) == pgid:
                return True
    return False


def _free_port_block(n: int) -> int:
    """A port p with p … p + n all free (serve_many.sh puts its proxy on p and its apps on p + 1 … p + n)."""
    for _ in range(50):
        base = free_port()
        if base + n < 65000 and all(_port_free(base + k) for k in range(1, n + 1)):
            return base
    raise RuntimeError("no free block of ports")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


@contextlib.contextmanager
def many_servers(processes: int, serve_dir: str, env: dict | None = None, timeout: float = 300):
    """``scripts/serve_many.sh PROCESSES PORT``: that many app processes behind nginx, their logs and pid files
    in ``serve_dir``; yield the proxy's base URL once it answers; stop the whole process group afterwards."""
    import signal
    import urllib.request

    port = _free_port_block(processes)
    full_env = {
        **os.environ,
        "NORMVIZ_SERVE_DIR": str(serve_dir),
        "HF_HUB_OFFLINE": "1",
        "PYTHON": sys.executable,
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    log_path = Path(serve_dir) / "serve_many.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "serve_many.sh"), str(processes), str(port)],
            cwd=ROOT,
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.time() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"serve_many.sh exited: {log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5):
                    break
            except OSError:
                if time.time() > deadline:
                    raise RuntimeError(f"the proxy did not answer within {timeout:.0f} s") from None
                time.sleep(1)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _listening(proc, port: int, deadline: float) -> bool:
    """Whether ``proc`` listens on ``port`` before ``deadline``; False at once if it exited."""
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        with contextlib.suppress(OSError):
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        time.sleep(0.3)
    return False


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


def wait_for_app(driver, min_charts: int = 1, timeout: float = 180, settle: float = 1.5, most: float = 1.5) -> dict:
    """Wait until at least ``min_charts`` plotly charts have drawn and the app stopped running, then until plotly
    has finished laying out: the charts' sizes and element counts and the page's height unchanged (and the app
    still idle) for ``settle`` s, at most ``most`` s after it first looked done (a rerun that starts meanwhile
    starts the wait again). The defaults keep the fixed 1.5 s of old: with 0.5 s a click on the sidebar right
    after lost the view's ``layer=2`` on a loaded machine (tests/app/test_app_browser.py). Past ``timeout`` the
    page's state is returned with ``timed_out`` set."""
    deadline = time.time() + timeout
    state: dict = {}
    settled_since = None
    last_layout = None
    while time.time() < deadline:
        state = driver.execute_script(_APP_STATE)
        layout = state.pop("layout")
        done = state["exceptions"] or (state["charts"] >= min_charts and not state["running"] and not state["skeleton"])
        now = time.time()
        if not done:
            settled_since = None
        elif settled_since is None:
            settled_since, stable_since = now, now
        elif layout != last_layout:
            stable_since = now
        if done and (now - stable_since >= settle or now - settled_since >= most):
            return state
        last_layout = layout
        time.sleep(0.1 if done else 0.25)
    state["timed_out"] = True  # the caller says what it expected (the state has the page's alerts)
    return state


_CHARTS = """
// charts in a tab not shown (or a closed expander) are not drawn until opened: only the charts on view count
const charts = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"]'))
    .filter(c => c.getClientRects().length > 0).map((c, i) => {
  const gd = c.querySelector('.js-plotly-plot');
  const box = c.closest('[class*="st-key-"]');
  const key = box ? (box.className.match(/st-key-(\\S+)/) || [])[1] : null;
  const title = gd && gd.layout && gd.layout.title ? (gd.layout.title.text || '') : '';
  const name = (key || ('chart ' + (i + 1))) + (title ? ' "' + title.replace(/<[^>]+>/g, '') + '"' : '');
  if (!gd || !gd._fullLayout || !gd._fullData || !c.querySelector('.main-svg')) return {name, want: -1, got: 0};
  const r = gd.getBoundingClientRect();
  const want = gd._fullData.filter(t => t.visible === true).length;
  const got = gd.querySelectorAll('.trace, .hm image, .contour image, .table-control-view, .imagelayer image').length;
  return {name, want, got, sized: r.width > 0 && r.height > 0};
});
const count = sel => document.querySelectorAll(sel).length;
const main = document.querySelector('[data-testid="stMain"]');
return {
  charts,
  running: count('[data-testid="stStatusWidget"]'),
  // stAppSkeleton: the whole page's placeholder while a page loads (an element's own is stSkeleton)
  skeleton: count('[data-testid="stSkeleton"], [data-testid="stAppSkeleton"]'),
  spinner: count('[data-testid="stSpinner"], [data-testid="stProgress"]'),
  exceptions: count('[data-testid="stException"]'),
  content: main ? main.querySelectorAll('[data-testid="stElementContainer"]').length : 0,
};"""


def chart_state(driver) -> dict:
    """The page's charts on view (not those of a tab not shown) and whether the app is busy; per chart ``name`` (its
    widget key or place, and title), ``want`` (its visible traces, -1 before plotly laid it out) and ``got`` (the
    trace groups and heatmap images drawn)."""
    return driver.execute_script(_CHARTS)


def undrawn(state: dict) -> list[str]:
    """The charts of ``state`` that have not drawn every visible trace (each named)."""
    return [
        f"{c['name']}: " + ("not laid out" if c["want"] < 0 else f"{c['got']} of {c['want']} traces drawn")
        for c in state["charts"]
        if c["want"] < 0 or c["got"] < c["want"] or not c.get("sized")
    ]


def wait_drawn(driver, min_charts: int = 1, timeout: float = 240, settle: float = 2.0, poll: float = 0.3) -> dict:
    """Wait until the app is idle (no "Running…", no skeleton or spinner), at least ``min_charts`` charts are on
    the page and every chart has drawn every visible trace, and all that has held unchanged for ``settle`` s (the
    app reruns once the page width is known); returns the last state. An exception box ends the wait at once.
    Past ``timeout``: ``TimeoutError`` naming each chart that did not draw, or what kept the app busy."""
    deadline = time.time() + timeout
    since, last = None, None
    state: dict = {}
    while True:
        try:
            state = chart_state(driver)
        except Exception as e:  # selenium's "script timeout": a page busy drawing under load answers late
            if type(e).__name__ != "TimeoutException" or time.time() > deadline:
                raise
            continue
        if state["exceptions"]:
            return state
        busy = state["running"] or state["skeleton"] or state["spinner"] or not state["content"]
        ready = not busy and len(state["charts"]) >= min_charts and not undrawn(state)
        snap = json.dumps(state["charts"])
        if ready and snap == last:
            if time.time() - since >= settle:
                time.sleep(0.3)  # the last frame painted
                return state
        else:
            since, last = time.time(), snap if ready else None
        if time.time() > deadline:
            why = (
                undrawn(state)
                or [f"{k}: {state[k]}" for k in ("running", "skeleton", "spinner") if state[k]]
                or [f"{len(state['charts'])} charts on the page, {min_charts} wanted"]
            )
            raise TimeoutError(f"not drawn within {timeout:.0f} s: " + "; ".join(why))
        time.sleep(poll)


def wait_for_redraw(driver, min_charts: int = 1, timeout: float = 180) -> dict:
    """:func:`wait_for_app`, then on until the page has held still (idle, the charts' layout unchanged) for
    1.5 s, at most 6 s: a page's first run is followed by the rerun at the main column's measured width
    (``components/main_width.js``: on mount, and 300 ms after a resize), which may not have started yet when
    the first draw is done. Replaces a fixed 2 s sleep followed by :func:`wait_for_app` (3.5 s at least)."""
    return wait_for_app(driver, min_charts, timeout, settle=1.5, most=6.0)


_APP_STATE = """
    const svgs = Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg'));
    return {
      charts: svgs.length > 0 ? document.querySelectorAll('[data-testid="stPlotlyChart"]').length : 0,
      drawn: document.querySelectorAll('[data-testid="stPlotlyChart"] .heatmaplayer image, '
        + '[data-testid="stPlotlyChart"] .hm image').length,
      exceptions: document.querySelectorAll('[data-testid="stException"]').length,
      alerts: Array.from(document.querySelectorAll('[data-testid="stAlert"]')).map(e => e.innerText),
      running: document.querySelectorAll('[data-testid="stStatusWidget"]').length,
      skeleton: document.querySelectorAll('[data-testid="stSkeleton"]').length,
      layout: svgs.map(s => { const r = s.getBoundingClientRect();
        return [Math.round(r.left), Math.round(r.top), Math.round(r.width), Math.round(r.height),
                s.querySelectorAll('*').length].join(','); }).join(';')
        + '|' + document.body.scrollHeight,
    };"""


def set_viewport(driver, width: int = 1280, height: int = 800) -> None:
    """An exact CSS viewport (the window size would include browser chrome)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
    )


def page_height(driver) -> int:
    return int(
        driver.execute_script("""
        const m = document.querySelector('[data-testid="stMain"]') || document.body;
        return Math.max(m.scrollHeight, document.body.scrollHeight);""")
    )


# --- issue 13: redraw latency, page switching through the sidebar, screenshots in every mode ---------------

SIZES = [(1280, 800), (1920, 1080)]
MODES = ["light", "dark", "present", "present-dark"]  # present: stage mode (?present=1), light or dark
SHOT_PAGES = [
    ("explore", "/"),
    ("why", "/Why"),
    ("overview", "/Overview"),
    ("learn", "/Learn"),
    ("corpus", "/Corpus"),
    ("translate", "/Translate"),
    ("trust", "/Trust"),
]
_IDLE = """return document.querySelectorAll('[data-testid="stStatusWidget"]').length === 0 &&
                  document.querySelectorAll('[data-testid="stSkeleton"]').length === 0;"""
_TITLES = """return Array.from(document.querySelectorAll('[data-testid="stPlotlyChart"] .gtitle'))
                  .map(t => t.textContent);"""


def wait_until(driver, script: str, timeout: float = 120, poll: float = 0.03, idle: bool = True) -> float:
    """Seconds until ``script`` (JS returning a boolean) is true (and, with ``idle``, the app is idle);
    raises on timeout."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if driver.execute_script(script) and (not idle or driver.execute_script(_IDLE)):
            return time.perf_counter() - t0
        time.sleep(poll)
    raise TimeoutError(f"not true within {timeout} s: {script[:200]}")


def titles(driver) -> list[str]:
    return driver.execute_script(_TITLES)


def server_times(log_path: str) -> list[float]:
    """The app's per-run server times (``NORMVIZ_TIMING=1`` lines of app.py) in the server log so far."""
    out = []
    try:
        for line in open(log_path, encoding="utf-8", errors="replace"):
            if line.startswith("normviz-timing "):
                out.append(float(line.split()[-1]))
    except OSError:
        pass
    return out


_WATCH = """
const w = window.__nvWatch = {cond: new Function(arguments[0]), t0: null, shown: null};
if (!window.__nvInputs) {
  window.__nvInputs = true;  // the time of the visitor's last key press or click
  for (const type of ['keydown', 'mousedown']) {
    document.addEventListener(type, e => { if (window.__nvWatch) window.__nvWatch.t0 = e.timeStamp; }, true);
  }
}
const look = () => {
  if (w.shown !== null || w.t0 === null) return;
  let ok = false;
  try { ok = !!w.cond(); } catch (e) { ok = false; }
  if (ok) { w.shown = -1; requestAnimationFrame(ts => { w.shown = ts; }); }  // the frame that paints it
};
if (window.__nvObserver) window.__nvObserver.disconnect();
window.__nvObserver = new MutationObserver(look);
window.__nvObserver.observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true});
"""


def timed(
    driver, log_path: str, action, done: str, timeout: float = 120, prepare=None, on_shown=None
) -> tuple[float, float, float]:
    """Seconds from the visitor's last key press or click of ``action()`` until ``done`` (JS returning a
    boolean) holds in the painted frame, timed inside the page (a busy page delays Selenium's polls, not
    these clocks); seconds until it holds and the app is idle (every rerun drawn, polled from here); and
    the server seconds of those runs. ``prepare()`` runs before (opening a box, typing into it);
    ``on_shown()`` as soon as ``done`` holds."""
    before = len(server_times(log_path))
    if prepare is not None:
        prepare()
    driver.execute_script(_WATCH, done)
    t0 = time.perf_counter()
    action()
    wait_until(driver, "return window.__nvWatch.shown !== null", timeout, poll=0.01, idle=False)
    if on_shown is not None:
        on_shown()
    wait_until(driver, "return window.__nvWatch.shown > 0", timeout, poll=0.01, idle=False)
    wait_until(driver, done, timeout)
    settled = time.perf_counter() - t0
    shown = driver.execute_script("return (window.__nvWatch.shown - window.__nvWatch.t0) / 1000;")
    time.sleep(0.3)  # the timing line is written when the run ends
    runs = server_times(log_path)[before:]
    return float(shown), settled, sum(runs)


def press_on_slider(driver, index: int, key: str) -> None:
    focus_slider(driver, index)
    press_key(driver, key)


def focus_slider(driver, index: int) -> None:
    """Give the keyboard focus to the ``index``-th slider of the main area."""
    from selenium.webdriver.common.by import By

    thumbs = driver.find_elements(
        By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stSlider"] input[type="range"]'
    )
    driver.execute_script("arguments[0].focus();", thumbs[index])


def press_key(driver, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(key).perform()


def open_selectbox(driver, label: str, option: str):
    """Open the selectbox labelled ``label`` and type ``option`` into it (not yet chosen: Enter chooses);
    returns its input."""
    from selenium.webdriver.common.by import By

    for box in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSelectbox"]'):
        if box.text.startswith(label):
            field = box.find_element(By.CSS_SELECTOR, "input")
            field.click()
            field.send_keys(option)
            return field
    raise LookupError(f"no selectbox labelled {label!r}")


def click_button(driver, text: str, where: str = '[data-testid="stSidebar"]') -> None:
    from selenium.webdriver.common.by import By

    for b in driver.find_elements(By.CSS_SELECTOR, f"{where} button"):
        if b.text.strip() == text:
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", b)
            b.click()
            return
    raise LookupError(f"no button {text!r}")


def click_nav(driver, title: str) -> None:
    from selenium.webdriver.common.by import By

    for a in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stSidebarNav"] a'):
        if a.text.strip().splitlines()[-1].strip() == title:
            a.click()
            return
    raise LookupError(f"no page {title!r} in the sidebar")


def text_inputs(driver) -> list[str]:
    return driver.execute_script("""return Array.from(document.querySelectorAll(
        '[data-testid="stMain"] [data-testid="stTextInput"] input')).map(i => i.value);""")


def emulate(driver, width: int, height: int, mode: str) -> None:
    set_viewport(driver, width, height)
    driver.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-color-scheme", "value": "dark" if mode.endswith("dark") else "light"}]},
    )


def screenshots(
    driver,
    url: str,
    out_dir: Path,
    query: str = "",
    pages=SHOT_PAGES,
    sizes=SIZES,
    modes=MODES,
    full: bool = False,
    max_full_px: int = 12000,
    timeout: float = 240,
    problems: list[str] | None = None,
    skip_existing: bool = False,
) -> list[Path]:
    """One screenshot per page × size × mode (light, dark = the browser's dark preference, present =
    ``?present=1`` in light, present-dark in dark) as ``<page>_<w>x<h>_<mode>.png``; returns the files written.
    Each is taken once every chart on the page has drawn and the app is idle (:func:`wait_drawn`); one that is
    not within ``timeout`` raises its ``TimeoutError`` (which chart did not draw), or, given a ``problems`` list,
    is taken anyway and its file and reason appended there. ``full``: also the whole page (the viewport
    stretched to the page's height, at most ``max_full_px``) as ``<page>_<w>x<h>_<mode>_full.png``, where the
    figures below the first screen show. ``skip_existing``: a shot whose file is there is not taken again (a pass
    cut short goes on where it stopped)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []

    def settled(f: Path, min_charts: int) -> None:
        try:
            wait_drawn(driver, min_charts=min_charts, timeout=timeout)
        except TimeoutError as e:
            if problems is None:
                raise TimeoutError(f"{f.name}: {e}") from None
            problems.append(f"{f.name}: {e}")

    def shoot(f: Path, min_charts: int) -> None:
        """Taken once drawn; again (up to 3 tries) when the app was running or a chart changed as it was taken:
        a rerun can start after the page settled (a component reporting the page's width, under load seconds
        late), and a shot then shows "Stop" and the last run's faded charts."""
        for _ in range(3):
            settled(f, min_charts)
            before = json.dumps(chart_state(driver)["charts"])
            driver.save_screenshot(str(f))
            after = chart_state(driver)
            if not (after["running"] or after["spinner"]) and json.dumps(after["charts"]) == before:
                return

    for w, h in sizes:
        for mode in modes:
            emulate(driver, w, h, mode)
            for name, path in pages:
                f = out_dir / f"{name}_{w}x{h}_{mode}.png"
                if skip_existing and f.exists():
                    continue
                q = "&".join(x for x in (query, "present=1" if mode.startswith("present") else "") if x)
                driver.get(url + path + ("?" + q if q else ""))
                shoot(f, 0 if name == "corpus" else 1)  # Corpus draws no chart before a run
                written.append(f)
                if full:
                    f = out_dir / f"{name}_{w}x{h}_{mode}_full.png"
                    set_viewport(driver, w, min(max_full_px, max(h, page_height(driver))))
                    settled(f, 0)
                    set_viewport(driver, w, min(max_full_px, max(h, page_height(driver))))  # charts may have grown
                    shoot(f, 0)
                    written.append(f)
                    set_viewport(driver, w, h)
    return written


def require_browser() -> None:
    """Skip the calling test, saying why, when selenium or a Chromium + chromedriver is missing."""
    import pytest

    pytest.importorskip("selenium", reason="selenium is not installed (pip install -r requirements-dev.txt)")
    if find_browser() is None:
        pytest.skip(
            "no Chromium + chromedriver on this machine and none could be installed "
            "(scripts/setup.sh runs `apt-get install chromium chromium-driver` when it is root)"
        )


# ------------------------------------------------- what a visitor waits for (the browser test, bench_browser)
EXPLORE_TEXT = "Dogs bark at the postman every single morning."


def all_titles_say(text: str, per_head: bool = False) -> str:
    """JS: every panel title (every per-head panel's, with ``per_head``) says ``text``."""
    pick = "s.includes(' · ') && s.includes(', ')" if per_head else "s.includes(' · ')"
    return (
        "const t = Array.from(document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .gtitle'))"
        f".map(e => e.textContent).filter(s => {pick});"
        f"return t.length >= {2 if per_head else 4} && t.every(s => s.includes({json.dumps(text)}));"
    )


_PANEL_Z = (
    "const keys = [...new Set(Array.from(document.querySelectorAll('[class*=\"st-key-panel_\"]'))"
    ".map(c => c.className.match(/st-key-panel_\\S+/)[0]))].sort();"
    "const got = keys.map(k => { const g = document.querySelector('.' + k + ' .js-plotly-plot');"
    " return g && g.layout && g.data ? [k + ' ' + g.layout.title.text, g.data[0].z] : null; });"
    "return got.includes(null) ? null : got;"
)  # null while a panel's chart is being remounted


def panel_z(driver, timeout: float = 10.0):
    """[(panel key and title, z)] of every Explore panel, once every panel holds a drawn chart (a rerun
    remounts a panel's chart for a moment: read then, the panel has none)."""
    deadline = time.monotonic() + timeout
    while True:
        got = driver.execute_script(_PANEL_Z)
        if got is not None or time.monotonic() > deadline:
            assert got is not None, "a panel held no drawn chart for 10 s"
            return got
        time.sleep(0.01)


def same_numbers(drawn_at_once, drawn_by_server) -> float:
    """Largest relative difference between the panels drawn in the browser at once and the same panels
    redrawn by the server (titles must agree; masked cells on both or neither)."""
    import re

    import numpy as np

    def text(t):  # chart key and title (Streamlit's theme makes titles bold)
        return re.sub(r"</?b>", "", t or "")

    def matrix(z):  # plotly keeps a typed array as {bdata, dtype, shape, _inputArray}
        z = z.get("_inputArray", z) if isinstance(z, dict) else z
        return np.array([[np.nan if v is None else v for v in row] for row in z], float)

    assert [text(t) for t, _ in drawn_at_once] == [text(t) for t, _ in drawn_by_server], (
        [t for t, _ in drawn_at_once],
        [t for t, _ in drawn_by_server],
    )
    worst = 0.0
    for (_, a), (_, b) in zip(drawn_at_once, drawn_by_server):
        a, b = matrix(a), matrix(b)
        assert a.shape == b.shape and (np.isnan(a) == np.isnan(b)).all()
        ok = ~np.isnan(a)
        worst = max(worst, float(np.max(np.abs(a[ok] - b[ok]) / np.maximum(np.abs(b[ok]), 1e-12), initial=0.0)))
    return worst


def measure_explore(driver, url: str, log: str, rounds: int) -> dict:
    """Medians of what a visitor waits for on Explore: ``shown_median_s`` until every panel shows the new
    state, ``median_s`` until the page is idle too (the rerun drawn). Layer and head changes are drawn in
    the browser from frames first; ``instant_vs_server_max_rel`` is how far those numbers were from the
    server's redraw of the same panels (frames carry 4 significant digits)."""
    from selenium.webdriver.common.keys import Keys

    driver.get(url + "/?text=" + EXPLORE_TEXT.replace(" ", "+"))
    wait_for_redraw(driver, min_charts=4)  # the page width is measured once and the page redrawn at it
    got = {"layer change": [], "head change": [], "map off": [], "map on": [], "new sentence": []}
    at_once, worst = {}, 0.0
    grab = lambda: at_once.__setitem__("z", panel_z(driver))  # noqa: E731
    box = {}
    for r in range(rounds):
        got["layer change"].append(
            timed(
                driver,
                log,
                lambda: press_key(driver, "\ue014"),  # →
                all_titles_say(f"layer {r + 1}"),
                prepare=lambda: focus_slider(driver, 0),
                on_shown=grab,
            )
        )
        worst = max(worst, same_numbers(at_once["z"], panel_z(driver)))
        got["head change"].append(
            timed(
                driver,
                log,
                lambda: box["field"].send_keys(Keys.ENTER),
                all_titles_say(f", head {r + 2}", per_head=True),
                prepare=lambda: box.__setitem__("field", open_selectbox(driver, "Head", f"head {r + 2}")),
                on_shown=grab,
            )
        )
        worst = max(worst, same_numbers(at_once["z"], panel_z(driver)))
        got["map off"].append(
            timed(
                driver,
                log,
                lambda: click_button(driver, "+ residual"),
                "return !Array.from(document.querySelectorAll('.gtitle')).some("
                "e => e.textContent.startsWith('Attention + residual ·'));",
            )
        )
        got["map on"].append(
            timed(
                driver,
                log,
                lambda: click_button(driver, "+ residual"),
                "return Array.from(document.querySelectorAll('.gtitle')).some("
                "e => e.textContent.startsWith('Attention + residual ·'));",
            )
        )
    from selenium.webdriver.common.by import By

    for r, word in enumerate(["river", "garden", "doctor"][: max(1, min(3, rounds))]):

        def type_sentence(w=word):
            box = driver.find_elements(By.CSS_SELECTOR, '[data-testid="stMain"] [data-testid="stTextInput"] input')[0]
            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(f"A {w} stood by the sea." + Keys.ENTER)

        got["new sentence"].append(
            timed(
                driver,
                log,
                type_sentence,
                "return Array.from(document.querySelectorAll('.ytick text')).some("
                f"t => t.textContent === {json.dumps(word)});",
            )
        )
    out = {
        k: {
            "shown_median_s": round(statistics.median(a for a, _, _ in v), 3),
            "median_s": round(statistics.median(b for _, b, _ in v), 3),
            "server_median_s": round(statistics.median(s for _, _, s in v), 3),
            "shown_runs": [round(a, 3) for a, _, _ in v],
            "runs": [round(b, 3) for _, b, _ in v],
        }
        for k, v in got.items()
    }
    out["instant_vs_server_max_rel"] = worst
    return out


def streamlit_floor(driver, url: str, rounds: int) -> float:
    """Median seconds for a bare Streamlit page (benchmarks/apps/bare_slider.py) to redraw four heatmaps
    after a key press on its slider, timed in the page like the app's changes (:func:`timed`)."""
    driver.get(url)
    wait_for_app(driver, min_charts=4)
    times = []
    for r in range(rounds):
        shown, _, _ = timed(
            driver,
            os.devnull,
            lambda: press_key(driver, "\ue014"),
            "return Array.from(document.querySelectorAll('.gtitle')).filter(t => "
            f"t.textContent.endsWith('layer {r + 1}')).length === 4;",
            prepare=lambda: focus_slider(driver, 0),
        )
        times.append(shown)
    return statistics.median(times)
