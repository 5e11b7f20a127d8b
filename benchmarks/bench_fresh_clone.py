"""Fresh clone → first drawn page, and the first smollm2 view after warm-up (issue 29 item 10, issue 32 item 5).

    .venv/bin/python benchmarks/bench_fresh_clone.py [--clone-dir /tmp/normviz-fresh] [--warm smollm2,minilm]

Clones this checkout (its committed HEAD) into a new folder, runs the README's app command there
(``bash scripts/app.sh --warm MODELS --server.port P``: a new .venv, the app's requirements only, SmolLM2
converted into a new, empty NORMVIZ_CACHE, the warm-up, the server), and times with headless Chromium (this
venv's selenium): the first Explore page with a drawn chart, then ``?model=smollm2`` (its first view, once every
model of --warm says it is warmed up: ``first_smollm2_view_drawn_s`` when a heatmap is drawn and the app idle,
``first_smollm2_view_s`` 1.5 s later as tools.browser.wait_for_app returns, the figure of earlier rounds). pip's own
download cache is what this machine has: say so with the figures
(here pip keeps none: its HTTP cache stays empty). Prints one JSON line; also the load average.

Every line the command prints is kept in ``app.log`` with the seconds since the clone started, and the phases are
read off them: ``normviz: set-up PHASE N s`` (scripts/setup.sh), ``normviz: warmed up …`` (the warm-up), the
server listening, the first page drawn; ``phases`` in the JSON gives each one's end time and the load average
(1 min) sampled then.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 1).close()
        return True
    except OSError:
        return False


def _drawn(driver, timeout: float) -> float:
    """When the page first shows a drawn heatmap and the app has stopped running (polled every 0.1 s; the
    condition of tools.browser.wait_for_app without its 1.5 s settling sleep)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        state = driver.execute_script("""
            return {drawn: document.querySelectorAll('[data-testid="stPlotlyChart"] .heatmaplayer image, '
                                                     + '[data-testid="stPlotlyChart"] .hm image').length,
                    running: document.querySelectorAll('[data-testid="stStatusWidget"]').length,
                    skeleton: document.querySelectorAll('[data-testid="stSkeleton"]').length};""")
        if state["drawn"] and not state["running"] and not state["skeleton"]:
            return time.perf_counter()
        time.sleep(0.1)
    return time.perf_counter()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clone-dir", default=None)
    ap.add_argument("--warm", default="smollm2,minilm")
    ap.add_argument("--timeout", type=float, default=1200)
    args = ap.parse_args(argv)
    from tools.browser import chromium, free_port, wait_for_app

    where = Path(args.clone_dir or tempfile.mkdtemp(prefix="normviz-fresh-"))
    if where.exists():
        shutil.rmtree(where)
    cache = Path(tempfile.mkdtemp(prefix="normviz-fresh-cache-"))
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(NORMVIZ_CACHE=str(cache), HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1", NORMVIZ_TIMING="1")
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True)
    phases: list[dict] = []

    def mark(name: str) -> None:
        phases.append(
            {"phase": name, "at_s": round(time.perf_counter() - t0, 1), "load1": round(os.getloadavg()[0], 2)}
        )

    mark("git clone")
    log = open(where / "app.log", "w")
    proc = subprocess.Popen(
        ["bash", "scripts/app.sh", "--warm", args.warm, "--server.port", str(port)],
        cwd=where,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
        errors="replace",
    )

    def stamp_lines() -> None:
        for line in proc.stdout:
            log.write(f"[{time.perf_counter() - t0:7.1f}] {line}")
            log.flush()
            if line.startswith("normviz: "):
                mark(line[len("normviz: ") :].strip())

    reader = threading.Thread(target=stamp_lines, daemon=True)
    reader.start()
    result: dict = {"warm": args.warm, "load_before": [round(x, 2) for x in load0]}
    try:
        while not _listening(port):
            if proc.poll() is not None or time.perf_counter() - t0 > args.timeout:
                raise RuntimeError(f"the app did not start (see {where / 'app.log'})")
            time.sleep(0.5)
        result["listening_s"] = round(time.perf_counter() - t0, 1)
        mark("server listening")
        with chromium() as driver:
            driver.get(f"http://127.0.0.1:{port}/")
            result["first_page_drawn_s"] = round(_drawn(driver, args.timeout) - t0, 1)
            wait_for_app(driver, timeout=args.timeout)
            result["first_page_s"] = round(time.perf_counter() - t0, 1)
            mark("first page drawn")
            # "after warm-up": the models warmed after the server started (a thread) are done first
            wanted = {m.strip().lower() for m in args.warm.split(",") if m.strip()}
            while not all(any(p["phase"].startswith(f"warmed up {m}") for p in phases) for m in wanted):
                if proc.poll() is not None or time.perf_counter() - t0 > args.timeout:
                    raise RuntimeError(f"the warm-up did not finish (see {where / 'app.log'})")
                time.sleep(0.2)
            result["warm_up_done_s"] = round(time.perf_counter() - t0, 1)
            t1 = time.perf_counter()
            driver.get(f"http://127.0.0.1:{port}/?model=smollm2")
            result["first_smollm2_view_drawn_s"] = round(_drawn(driver, args.timeout) - t1, 2)
            wait_for_app(driver, timeout=args.timeout)  # as before: drawn, then 1.5 s to settle
            result["first_smollm2_view_s"] = round(time.perf_counter() - t1, 2)
            mark("first smollm2 view drawn")
            # the baseline in the same run: a fresh page of the first model again (a new browser session, its
            # maps cached): what any page load costs here, smollm2 or not
            t2 = time.perf_counter()
            driver.get(f"http://127.0.0.1:{port}/?model=minilm")
            result["minilm_again_drawn_s"] = round(_drawn(driver, args.timeout) - t2, 2)
            wait_for_app(driver, timeout=args.timeout)
            result["minilm_again_s"] = round(time.perf_counter() - t2, 2)
        result["phases"] = phases
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
        reader.join(timeout=10)
        log.close()
        result["load_after"] = [round(x, 2) for x in os.getloadavg()]
        shutil.rmtree(cache, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
