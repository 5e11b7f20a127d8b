"""Two real visitors on one local server: does visitor A's heavy analysis slow down visitor B's short one?

    python benchmarks/bench_two_visitors.py [--repeats 3] [--workers 1 0] [--json out.json]

For each server configuration (``NORMVIZ_HEAVY_WORKERS``: 1 = the costly maps in the worker process of
:mod:`normviz.workers`, 0 = everything in the server's threads, as before) a real ``streamlit run app.py`` is
started and two headless Chromium browsers (two Streamlit sessions) open it through URL query parameters:

  A: a 128-token text (the cap) with FF maps, value zeroing, ALTI, effective attention and flow (flow is refused
     by its token limit at 128 tokens: that refusal is part of what a visitor gets);
  B: a short sentence with one map (norm).

Per repeat, alternating which comes first: B alone, and B started while A's analysis is running (A is started,
B once A's progress bar shows its heavy maps underway). Every A and B text is new (a word changes), so
nothing comes from the server's caches. B's latency: from opening the page to its heatmap drawn and the
app idle. Reported: the medians, B during A / B alone (target ≤ 2), and whether A was still running when B
finished. The server is warmed first (model loaded, kernels compiled, worker started) with one A and one B.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from tests.helpers.browser import chromium, find_browser, streamlit_server  # noqa: E402

HEAVY_MAPS = "ff_res_ln,value_zeroing,alti,effective_attention,flow"
SHORT_MAP = "norm"
PARAGRAPH = ("The committee met on a cold morning in the old town hall to discuss the budget for the coming year, "
             "and after a long and sometimes heated debate about roads, schools, the harbour and the new library, "
             "the members agreed to postpone the final vote until the engineers had finished their survey of the "
             "bridge, which had been closed since the storm in the spring, when the river rose higher than anyone "
             "in the village could remember and the fields along both banks stayed under water for many weeks "
             "while the farmers waited for the ground to dry out before they could plant again.")

STATE_JS = """
return {
  charts: document.querySelectorAll('[data-testid="stPlotlyChart"] .main-svg').length,
  progress: Array.from(document.querySelectorAll('[data-testid="stProgress"]')).map(e => e.innerText).join(' | '),
  running: document.querySelectorAll('[data-testid="stStatusWidget"]').length,
  skeleton: document.querySelectorAll('[data-testid="stSkeleton"]').length,
  exceptions: document.querySelectorAll('[data-testid="stException"]').length,
  alerts: Array.from(document.querySelectorAll('[data-testid="stAlert"]')).map(e => e.innerText),
};"""


def url(base: str, text: str, maps: str) -> str:
    return base + "/?" + urllib.parse.urlencode({"text": text, "maps": maps, "model": "minilm"})


def state(driver) -> dict:
    return driver.execute_script(STATE_JS)


def done(s: dict) -> bool:
    return bool(s["exceptions"]) or (s["charts"] >= 1 and not s["running"] and not s["skeleton"] and not s["progress"])


def open_and_wait(driver, address: str, timeout: float = 600.0) -> tuple[float, dict]:
    """Open ``address`` in ``driver``; seconds until its first heatmap is drawn and the app is idle."""
    t0 = time.perf_counter()
    driver.get(address)
    while time.perf_counter() - t0 < timeout:
        s = state(driver)
        if done(s):
            return time.perf_counter() - t0, s
        time.sleep(0.05)
    raise RuntimeError(f"no result within {timeout:.0f} s: {s}")


def start_heavy(driver, address: str, timeout: float = 300.0) -> float:
    """Open A's page and return once its progress bar shows a heavy map being computed (seconds taken)."""
    t0 = time.perf_counter()
    driver.get(address)
    while time.perf_counter() - t0 < timeout:
        s = state(driver)
        p = s["progress"].lower()
        if any(k in p for k in ("feedforward", "zeroing", "interactions", "effective", "worker", "ff_res")):
            return time.perf_counter() - t0
        if done(s):
            raise RuntimeError(f"A finished before B could start: {s}")
        time.sleep(0.05)
    raise RuntimeError("A's heavy maps never started")


def wait_idle(driver, timeout: float = 900.0) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if done(state(driver)):
            return time.perf_counter() - t0
        time.sleep(0.2)
    raise RuntimeError("A did not finish")


def run_config(workers: int, repeats: int, log_dir: str) -> dict:
    env = {"NORMVIZ_HEAVY_WORKERS": str(workers)}
    solo, shared, a_running, a_total = [], [], [], []
    with streamlit_server(env, log_path=os.path.join(log_dir, f"server_w{workers}.log")) as base, \
            chromium() as da, chromium() as db:
        # warm-up: model load, numba kernels, the worker process and its model
        open_and_wait(db, url(base, "Warm up the server with a short sentence.", SHORT_MAP))
        open_and_wait(da, url(base, "Warm-up. " + PARAGRAPH, HEAVY_MAPS))
        for r in range(repeats):
            b_solo_text = f"The cat number {r} sat quietly on the warm mat."
            b_shared_text = f"A dog number {r} barked loudly at the night sky."
            a_text = f"Run {r}. " + PARAGRAPH
            order = ["solo", "shared"] if r % 2 == 0 else ["shared", "solo"]
            for what in order:
                if what == "solo":
                    t, _ = open_and_wait(db, url(base, b_solo_text, SHORT_MAP))
                    solo.append(t)
                else:
                    t_a0 = time.perf_counter()
                    start_heavy(da, url(base, a_text, HEAVY_MAPS))
                    time.sleep(0.5)
                    t, _ = open_and_wait(db, url(base, b_shared_text, SHORT_MAP))
                    shared.append(t)
                    a_running.append(not done(state(da)))
                    wait_idle(da)
                    a_total.append(time.perf_counter() - t_a0)
                print(f"workers={workers} repeat {r} {what}: B {t:.2f} s", flush=True)
    ms, mh = statistics.median(solo), statistics.median(shared)
    return {"heavy_workers": workers, "b_solo_s": solo, "b_during_a_s": shared, "a_still_running": a_running,
            "a_total_s": a_total, "b_solo_median_s": ms, "b_during_a_median_s": mh, "ratio": mh / ms,
            "a_median_s": statistics.median(a_total)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 0], help="NORMVIZ_HEAVY_WORKERS values to run")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--logs", default=os.environ.get("TMPDIR", "/tmp"), help="directory for the servers' logs")
    args = ap.parse_args()
    if find_browser() is None:
        sys.exit("no chromium/chromedriver found")
    out = {"load_1min": os.getloadavg()[0], "cpus": os.cpu_count(), "configs": []}
    for w in args.workers:
        res = run_config(w, args.repeats, args.logs)
        out["configs"].append(res)
        print(f"NORMVIZ_HEAVY_WORKERS={w}: B alone {res['b_solo_median_s']:.2f} s, B while A runs "
              f"{res['b_during_a_median_s']:.2f} s (ratio {res['ratio']:.2f}; A still running at B's end: "
              f"{sum(res['a_still_running'])}/{len(res['a_still_running'])}; A took {res['a_median_s']:.0f} s)",
              flush=True)
    out["load_1min_end"] = os.getloadavg()[0]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
