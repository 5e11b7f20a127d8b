"""Two real visitors on one local server: does visitor A's heavy analysis slow down visitor B's short one?

    python benchmarks/bench_two_visitors.py [--repeats 3] [--workers 1 0] [--baseline /work/main] [--json out.json]

For each server configuration (``NORMVIZ_HEAVY_WORKERS``: 1 = the costly maps in the worker process of
:mod:`normviz.workers.process`, 0 = everything in the server's threads; ``--baseline DIR``: the same pages with the
``normviz`` package of another checkout, e.g. the code before this change) a real ``streamlit run app.py`` is
started and two headless Chromium browsers (two Streamlit sessions) open it through URL query parameters:

  A: a 128-token text (the cap) with FF maps, value zeroing, ALTI, effective attention and flow (flow is refused
     by its token limit at 128 tokens: that refusal is part of what a visitor gets);
  B: a short sentence with one map (norm).

Per repeat, alternating which comes first: B alone, and B while A's analysis runs: A is started, then B is
opened once A's progress bar shows its FF maps underway, and again (a new sentence) once it shows value
zeroing underway (the phase in which the code before this change held the model's lock). Every A and B text is new (a
word changes), so
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

from tools.browser import chromium, find_browser, streamlit_server  # noqa: E402

HEAVY_MAPS = "ff_res_ln,value_zeroing,alti,effective_attention,flow"
SHORT_MAP = "norm"
PARAGRAPH = (
    "The committee met on a cold morning in the old town hall to discuss the budget for the coming year, "
    "and after a long and sometimes heated debate about roads, schools, the harbour and the new library, "
    "the members agreed to postpone the final vote until the engineers had finished their survey of the "
    "bridge, which had been closed since the storm in the spring, when the river rose higher than anyone "
    "in the village could remember and the fields along both banks stayed under water for many weeks "
    "while the farmers waited for the ground to dry out before they could plant again."
)

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
    """The page's state; a page too busy to answer (a script timeout on this loaded machine) reads as running."""
    from selenium.common.exceptions import TimeoutException

    try:
        return driver.execute_script(STATE_JS)
    except TimeoutException:
        return {"charts": 0, "progress": "", "running": 1, "skeleton": 0, "exceptions": 0, "alerts": []}


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


def wait_phase(driver, words: tuple[str, ...], timeout: float = 600.0) -> bool:
    """Wait until A's progress bar names one of ``words``; False if A finished first."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        s = state(driver)
        if any(w in s["progress"].lower() for w in words):
            return True
        if done(s):
            return False
        time.sleep(0.05)
    raise RuntimeError(f"A never reached {words}")


FF_PHASE = ("feedforward",)
VZ_PHASE = ("zeroing: layer",)


def wait_idle(driver, timeout: float = 900.0) -> float:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if done(state(driver)):
            return time.perf_counter() - t0
        time.sleep(0.2)
    raise RuntimeError("A did not finish")


def run_config(workers: int, repeats: int, log_dir: str, baseline: str | None = None) -> dict:
    env = {"NORMVIZ_HEAVY_WORKERS": str(workers)}
    if baseline:
        env["PYTHONPATH"] = os.path.abspath(baseline)  # its normviz (and normviz.ui) under these pages
    solo, during = [], {"ff": [], "vz": []}
    a_running, a_total = [], []
    name = "baseline" if baseline else f"workers={workers}"
    with (
        streamlit_server(
            env, log_path=os.path.join(log_dir, f"server_{'baseline' if baseline else workers}.log")
        ) as base,
        chromium() as da,
        chromium() as db,
    ):
        # warm-up: model load, numba kernels, the worker process and its model
        open_and_wait(db, url(base, "Warm up the server with a short sentence.", SHORT_MAP))
        open_and_wait(da, url(base, "Warm-up. " + PARAGRAPH, HEAVY_MAPS))
        for r in range(repeats):
            order = ["solo", "shared"] if r % 2 == 0 else ["shared", "solo"]
            for what in order:
                if what == "solo":
                    t, _ = open_and_wait(db, url(base, f"The cat number {r} sat quietly on the warm mat.", SHORT_MAP))
                    solo.append(t)
                    print(f"{name} repeat {r} B alone: {t:.2f} s", flush=True)
                    continue
                t_a0 = time.perf_counter()
                da.get(url(base, f"Run {r}. " + PARAGRAPH, HEAVY_MAPS))
                for phase, words, text in (
                    ("ff", FF_PHASE, f"A dog number {r} barked loudly at the night sky."),
                    ("vz", VZ_PHASE, f"Snow number {r} fell softly on the quiet town."),
                ):
                    if not wait_phase(da, words):
                        print(f"{name} repeat {r}: A finished before its {phase} phase was seen", flush=True)
                        continue
                    time.sleep(0.5)
                    t, _ = open_and_wait(db, url(base, text, SHORT_MAP))
                    during[phase].append(t)
                    a_running.append(not done(state(da)))
                    print(
                        f"{name} repeat {r} B during A's {phase}: {t:.2f} s (A still running: {a_running[-1]})",
                        flush=True,
                    )
                wait_idle(da)
                a_total.append(time.perf_counter() - t_a0)
    ms = statistics.median(solo)
    out = {
        "heavy_workers": None if baseline else workers,
        "baseline": baseline,
        "b_solo_s": solo,
        "b_during_a_ff_s": during["ff"],
        "b_during_a_vz_s": during["vz"],
        "a_still_running": a_running,
        "a_total_s": a_total,
        "b_solo_median_s": ms,
        "a_median_s": statistics.median(a_total),
    }
    for phase in ("ff", "vz"):
        if during[phase]:
            out[f"b_during_a_{phase}_median_s"] = statistics.median(during[phase])
            out[f"ratio_{phase}"] = out[f"b_during_a_{phase}_median_s"] / ms
    return out


def library(repeats: int) -> dict:
    """The same question without browser and server: B's ``Session.get(["norm"])`` of a short sentence alone
    and while A's costly maps run in another thread of this process, with and without the worker."""
    import threading

    import normviz
    from normviz.workers.process import HeavyWorker

    lm = normviz.load("minilm")
    heavy = HEAVY_MAPS.split(",")
    out = {}
    for mode in ("worker", "threads"):
        worker = HeavyWorker(1) if mode == "worker" else None
        normviz.Session(lm, "Warm-up. " + PARAGRAPH, worker=worker).get(heavy + ["norm"], strict=False)
        normviz.Session(lm, f"Warm up the short path too, {mode}.").get(["norm"])
        solo, during = [], []
        for r in range(repeats):
            for k in range(3):  # spaced like the measurements during A
                time.sleep(1.0)
                t0 = time.perf_counter()
                normviz.Session(lm, f"The cat number {r}.{k} sat on the mat, {mode}.").get(["norm"])
                solo.append(time.perf_counter() - t0)
            a = threading.Thread(
                target=lambda: normviz.Session(lm, f"Run {r} {mode}. " + PARAGRAPH, worker=worker).get(
                    heavy, strict=False
                )
            )
            a.start()
            time.sleep(2.0)
            for k in range(3):
                t0 = time.perf_counter()
                normviz.Session(lm, f"A dog number {r}.{k} barked at the sky, {mode}.").get(["norm"])
                during.append(time.perf_counter() - t0)
                time.sleep(1.0)
            a.join()
        if worker is not None:
            worker.shutdown()
        out[mode] = {
            "b_solo_s": solo,
            "b_during_a_s": during,
            "b_solo_median_s": statistics.median(solo),
            "b_during_a_median_s": statistics.median(during),
            "ratio": statistics.median(during) / statistics.median(solo),
        }
        print(
            f"library, {mode}: B alone {out[mode]['b_solo_median_s'] * 1e3:.0f} ms, during A "
            f"{out[mode]['b_during_a_median_s'] * 1e3:.0f} ms (ratio {out[mode]['ratio']:.2f})",
            flush=True,
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 0], help="NORMVIZ_HEAVY_WORKERS values to run")
    ap.add_argument("--baseline", help="also run the pages with the normviz package of this checkout")
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--logs", default=os.environ.get("TMPDIR", "/tmp"), help="directory for the servers' logs")
    ap.add_argument("--library", action="store_true", help="only the in-process measurement (no browser, no server)")
    args = ap.parse_args()
    if args.library:
        res = {"load_1min": os.getloadavg()[0], "library": library(args.repeats), "load_1min_end": os.getloadavg()[0]}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(res, f, indent=1)
        return
    if find_browser() is None:
        sys.exit("no chromium/chromedriver found")
    out = {"load_1min": os.getloadavg()[0], "cpus": os.cpu_count(), "configs": []}
    configs = [(w, None) for w in args.workers] + ([(0, args.baseline)] if args.baseline else [])
    for w, baseline in configs:
        res = run_config(w, args.repeats, args.logs, baseline)
        out["configs"].append(res)
        if args.json:  # after each configuration: a later one that fails keeps the earlier figures
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
        name = f"baseline {baseline}" if baseline else f"NORMVIZ_HEAVY_WORKERS={w}"
        print(
            f"{name}: B alone {res['b_solo_median_s']:.2f} s; B during A's FF maps "
            f"{res.get('b_during_a_ff_median_s', float('nan')):.2f} s (ratio {res.get('ratio_ff', float('nan')):.2f}), "
            f"during its value zeroing {res.get('b_during_a_vz_median_s', float('nan')):.2f} s "
            f"(ratio {res.get('ratio_vz', float('nan')):.2f}); A still running at B's end: "
            f"{sum(res['a_still_running'])}/{len(res['a_still_running'])}; A took {res['a_median_s']:.0f} s",
            flush=True,
        )
    out["load_1min_end"] = os.getloadavg()[0]
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
