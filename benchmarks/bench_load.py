"""Many visitors at once on one app server: raw websocket visitors (no browser) on loopback, bounded time.

    python benchmarks/bench_load.py [--visitors 7] [--seconds 90] [--configs gc=false gc=true] [--json out.json]

Each config starts ``streamlit run app.py`` (``NORMVIZ_PUBLIC=1``; ``gc=…`` sets
``STREAMLIT_RUNNER_POST_SCRIPT_GC``, overriding ``.streamlit/config.toml``), loads both models once, then runs
``--visitors`` visitors for ``--seconds``: visitor k uses minilm (even k) or smollm2 (odd k) and loops
without pause: a new sentence typed into the text box, then three layer-slider moves. Reported per model:
median (and p90) seconds of a layer change and of a new sentence, bytes received per rerun, errors
(exceptions or error alerts), and "mixed views": the last view of every visitor replayed alone in a fresh
session must show the same heatmaps (|Δz| ≤ 1e-5). The 1-minute load average is sampled through the run.
Configs alternate in one run (baseline beside candidate); the machine is shared, so read ratios.

    python benchmarks/bench_load.py --long 3 --visitors 4 --configs max=4096 [--idle 120]

``--long N`` (issue 29): N more visitors each paste a different ~4,000-token text on Explore (smollm2, the
public app's token cap from ``max=…``: NORMVIZ_MAX_TOKENS), change the layer twice and leave, beside the
short-text visitors; reported: the server's RSS (start, peak, ``--idle`` s after the last visitor left) against
its memory budget (NORMVIZ_SERVER_MEMORY_MB), the worker processes' RSS, the long visitors' times, and the
short visitors' layer changes during the long pastes.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from ws_visitor import Visitor  # noqa: E402

from tests.helpers.app import arr  # noqa: E402
from tests.helpers.browser import many_servers, streamlit_server  # noqa: E402

WORDS = (
    "the cat dog bird house river mountain teacher student city night morning rain sun old young small "
    "large quiet loud happy tired red green walked saw found gave took made near under over with"
).split()
LAYERS = {"minilm": 6, "smollm2": 30}


def sentence(rng: random.Random, n: int = 10) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def server_process():
    """The streamlit server started by this process (not its worker processes), or None."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            if "streamlit" in " ".join(child.cmdline()) and "normviz.workers" not in " ".join(child.cmdline()):
                return child
        except psutil.Error:
            continue
    return None


def worker_rss_mb() -> float:
    """RSS of the server's worker processes (normviz.workers.process) together, in MB."""
    import psutil

    total = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            if "normviz.workers" in " ".join(child.cmdline()):
                total += child.memory_info().rss / 2**20
        except psutil.Error:
            continue
    return total


def long_text(k: int, words: int = 3900) -> str:
    """A different ~4,000-token text per visitor ``k`` (smollm2: about one token a word)."""
    rng = random.Random(1000 + k)
    return " ".join(sentence(rng, 13) for _ in range(words // 13))


def long_visitor(url: str, k: int, out: list, lock: threading.Lock, changes: int = 2) -> None:
    """Paste a long text on Explore (smollm2), change the layer ``changes`` times, leave."""
    rng = random.Random(k)
    rec = {"model": "long", "open_s": None, "layer_s": [], "errors": 0, "alerts": [], "charts": 0}
    try:
        v = Visitor(url, timeout=1200)
        r = v.open(urllib.parse.urlencode({"model": "smollm2", "text": long_text(k)}))
        rec["open_s"], rec["charts"] = round(r.seconds, 2), len(r.charts)
        rec["errors"] += is_error(r)
        rec["alerts"] += [a[:160] for a in r.alerts]
        layer = 0
        for _ in range(changes):
            layer = (layer + rng.randint(1, LAYERS["smollm2"] - 1)) % LAYERS["smollm2"]
            r = v.set_widget("w_layer", double_array_value=[float(layer)])
            rec["layer_s"].append(round(r.seconds, 2))
            rec["errors"] += is_error(r)
            rec["alerts"] += [a[:160] for a in r.alerts]
        v.close()
    except Exception as exc:
        rec["errors"] += 1
        rec["crash"] = f"{type(exc).__name__}: {exc}"
    rec["left_at"] = time.time()
    with lock:
        out.append(rec)


def server_rss_mb() -> float:
    """RSS of the streamlit server (its worker processes not counted), in MB."""
    import psutil

    proc = server_process()
    try:
        return proc.memory_info().rss / 2**20 if proc is not None else float("nan")
    except psutil.Error:
        return float("nan")


MARKERS = {
    "gc.collect after each rerun": "_on_script_finished",
    "frames": "instant_frames",
    "shown_matrix": "shown_matrix",
    "transformed_norms": "transformed_norms",
    "recording passes": "record",
    "plotly figure building": "plotly/basedatatypes",
    "json / protobuf": "to_json",
}


EVENT_LOOP = ("asyncio/base_events.py", "uvicorn/")  # frames only the event-loop thread's stacks hold
LOOP_WORK = {
    "websocket send": "send_bytes",
    "deflate": "compress",
    "protobuf serialise": "SerializeToString",
    "forward-msg queue": "forward_msg_queue",
    "message cache": "message_cache",
    "session handling": "app_session.py",
    "websocket receive": "receive",
}


def profile(seconds: float, out_path: str) -> dict:
    """py-spy (PyPI) on the server for ``seconds``: the share of samples whose stack holds each marker, and
    the ten busiest leaf functions."""
    import shutil
    import subprocess

    spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    proc = server_process()
    if proc is None or not os.path.exists(spy):
        return {"error": "no server or no py-spy (pip install py-spy)"}
    r = subprocess.run(
        [
            spy,
            "record",
            "--pid",
            str(proc.pid),
            "--duration",
            str(int(seconds)),
            "--format",
            "raw",
            "--output",
            out_path,
            "--nonblocking",
            "--threads",
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0 or not os.path.exists(out_path):
        return {"error": (r.stderr or r.stdout)[-500:]}
    total, marked, leaves, threads, loop = 0, dict.fromkeys(MARKERS, 0), {}, {}, {}
    with open(out_path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            if not n.isdigit():
                continue
            n = int(n)
            total += n
            thread = stack.split(";")[0]
            threads[thread] = threads.get(thread, 0) + n
            if any(m in stack for m in EVENT_LOOP):  # the server's event-loop thread (asyncio, uvicorn)
                what = next((name for name, m in LOOP_WORK.items() if m in stack), "other")
                loop[what] = loop.get(what, 0) + n
            for name, marker in MARKERS.items():
                if marker in stack:
                    marked[name] += n
            leaf = stack.split(";")[-1]
            leaves[leaf] = leaves.get(leaf, 0) + n
    share = {k: round(v / max(total, 1), 3) for k, v in marked.items()}
    top = sorted(leaves.items(), key=lambda kv: -kv[1])[:10]
    busiest = sorted(threads.items(), key=lambda kv: -kv[1])[:8]
    return {
        "samples": total,
        "share": share,
        "top_leaves": [(k[:120], round(v / max(total, 1), 3)) for k, v in top],
        "threads": [(k[:80], round(v / max(total, 1), 3)) for k, v in busiest],
        "event_loop": round(sum(loop.values()) / max(total, 1), 3),
        "event_loop_parts": {k: round(v / max(total, 1), 3) for k, v in sorted(loop.items(), key=lambda kv: -kv[1])},
    }


def loadavg() -> float:
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def _is_heatmap(spec) -> bool:
    return bool(spec.get("data")) and spec["data"][0].get("type") == "heatmap"


def heatmap_zs(run) -> list:
    return [
        arr(spec["data"][0]["z"])
        for _, spec in sorted(run.charts.items(), key=lambda kv: str(kv[0]))
        if _is_heatmap(spec)
    ]


def is_error(run) -> bool:
    return run.exceptions > 0 or any("could not" in a.lower() or "error" in a.lower()[:40] for a in run.alerts)


def visitor(url: str, k: int, until: float, out: list, lock: threading.Lock) -> None:
    model = "minilm" if k % 2 == 0 else "smollm2"
    rng = random.Random(k)
    rec = {
        "model": model,
        "layer_s": [],
        "sentence_s": [],
        "bytes": [],
        "errors": 0,
        "last": None,
        "alerts": {},
        "no_heatmaps": 0,
    }

    def seen(r):  # every alert a short visitor was shown (a refusal at the memory budget is not an error)
        for a in r.alerts:
            rec["alerts"][a[:100]] = rec["alerts"].get(a[:100], 0) + 1
        rec["no_heatmaps"] += not any(_is_heatmap(spec) for spec in r.charts.values())  # counted, not converted

    try:
        v = Visitor(url)
        text = sentence(rng)
        first = v.open(urllib.parse.urlencode({"model": model, "text": text}))
        rec["errors"] += is_error(first)
        layer = 0
        while time.time() < until:
            text = sentence(rng)
            r = v.set_widget("w_text", string_value=text)
            seen(r)
            rec["sentence_s"].append(r.seconds)
            rec["bytes"].append(r.bytes)
            rec["errors"] += is_error(r)
            for _ in range(3):
                if time.time() >= until:
                    break
                layer = (layer + rng.randint(1, LAYERS[model] - 1)) % LAYERS[model]
                r = v.set_widget("w_layer", double_array_value=[float(layer)])
                seen(r)
                rec["layer_s"].append(r.seconds)
                rec["bytes"].append(r.bytes)
                rec["errors"] += is_error(r)
            rec["last"] = (text, layer, heatmap_zs(r))
        v.close()
    except Exception as exc:  # a visitor that broke counts as an error
        rec["errors"] += 1
        rec["crash"] = f"{type(exc).__name__}: {exc}"
    with lock:
        out.append(rec)


def mixed_views(url: str, recs: list, details: list | None = None) -> tuple[int, int]:
    """(views replayed, views that differ) for every visitor's last view, replayed alone; ``details`` gets
    each replay's heatmap counts, largest difference and the alerts shown."""
    tried = differ = 0
    for rec in recs:
        if not rec.get("last"):
            continue
        text, layer, zs = rec["last"]
        v = Visitor(url)
        r = v.open(urllib.parse.urlencode({"model": rec["model"], "text": text, "layer": layer}))
        v.close()
        alone = heatmap_zs(r)
        tried += 1
        same = len(alone) == len(zs) and all(
            a.shape == b.shape and np.allclose(a, b, rtol=0, atol=1e-5, equal_nan=True) for a, b in zip(alone, zs)
        )  # NaN: a decoder's masked cells
        differ += not same
        if details is not None:
            diff = (
                max(float(np.nanmax(np.abs(a - b))) if a.size else 0.0 for a, b in zip(alone, zs))
                if len(alone) == len(zs) and all(a.shape == b.shape for a, b in zip(alone, zs)) and zs
                else None
            )
            details.append(
                {
                    "model": rec["model"],
                    "heatmaps": [len(zs), len(alone)],
                    "max_diff": diff,
                    "alerts_alone": [a[:100] for a in r.alerts],
                }
            )
    return tried, differ


def summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    s = sorted(values)
    return {"n": len(s), "median": round(statistics.median(s), 3), "p90": round(s[int(0.9 * (len(s) - 1))], 3)}


def _made(path: str) -> str:
    os.makedirs(path, exist_ok=True)
    return path


def run_config(
    name: str,
    env: dict,
    visitors: int,
    seconds: float,
    log_dir: str,
    spy_s: float = 0.0,
    processes: int = 1,
    long: int = 0,
    idle_s: float = 120.0,
) -> dict:
    print(f"== {name}", file=sys.stderr, flush=True)
    server = (
        streamlit_server({"NORMVIZ_PUBLIC": "1", **env}, log_path=os.path.join(log_dir, f"server_{name}.log"))
        if processes <= 1
        else many_servers(processes, _made(os.path.join(log_dir, f"serve_many_{name}")), {"NORMVIZ_PUBLIC": "1", **env})
    )
    with server as url:
        for _ in range(max(1, processes) * 2):  # each model loaded once per process (visits spread), not timed
            for model in ("minilm", "smollm2"):
                v = Visitor(url)
                v.open(urllib.parse.urlencode({"model": model, "text": "Warm up."}))
                v.close()
        solo = {}
        for model in ("minilm", "smollm2"):  # one visitor alone first: the reference
            v = Visitor(url)
            v.open(urllib.parse.urlencode({"model": model, "text": "A quiet morning in the old city."}))
            solo[model] = {
                "layer_s": round(
                    statistics.median(
                        [v.set_widget("w_layer", double_array_value=[float(x)]).seconds for x in (1, 3, 2)]
                    ),
                    3,
                )
            }
            solo[model]["sentence_s"] = round(v.set_widget("w_text", string_value="The red bird sang.").seconds, 3)
            v.close()
        recs, lock, loads, rss = [], threading.Lock(), [], [server_rss_mb()]
        wrss, longs = [worker_rss_mb()], []
        until = time.time() + seconds
        threads = [threading.Thread(target=visitor, args=(url, k, until, recs, lock)) for k in range(visitors)]
        threads += [threading.Thread(target=long_visitor, args=(url, k, longs, lock)) for k in range(long)]
        for t in threads:
            t.start()
        spied = {}
        if spy_s > 0:  # py-spy in the middle of the load (it blocks this thread meanwhile)
            time.sleep(min(10.0, seconds / 4))
            loads.append(loadavg())
            spied = profile(min(spy_s, seconds / 2), os.path.join(log_dir, f"pyspy_{name}.txt"))
        while any(t.is_alive() for t in threads):
            loads.append(loadavg())
            rss.append(server_rss_mb())
            wrss.append(worker_rss_mb())
            time.sleep(2)
        after = {}
        if long:  # everyone left: the memory back?
            left = time.time()
            while time.time() - left < idle_s:
                time.sleep(5)
                after[round(time.time() - left)] = (round(server_rss_mb(), 1), round(worker_rss_mb(), 1))
        details = []
        tried, differ = mixed_views(url, recs, details)
    out = {
        "config": name,
        "env": env,
        "processes": processes,
        "visitors": visitors,
        "seconds": seconds,
        "solo": solo,
        "load_avg": {"mean": round(statistics.mean(loads), 2) if loads else None, "max": max(loads, default=None)},
        "mixed_views": {"replayed": tried, "differ": differ, "details": details},
        "server_rss_mb": {"start": round(rss[0], 1), "max": round(max(rss), 1), "end": round(rss[-1], 1)},
        "profile": spied,
        "models": {},
    }
    if long:
        from normviz.ui.kit.server_memory import limit_mb
        from normviz.ui.kit.settings import load_settings

        budget = limit_mb(load_settings({"NORMVIZ_PUBLIC": "1", **env}).server_memory_mb)
        end = list(after.values())[-1] if after else (float("nan"), float("nan"))
        out["long"] = {
            "visitors": long,
            "server_budget_mb": round(budget),
            "server_rss_mb": {
                "start": round(rss[0], 1),
                "peak": round(max(rss), 1),
                f"after_{idle_s:.0f}s": end[0],
                "back_within_10pct": bool(end[0] <= 1.1 * rss[0]),
                "under_budget": bool(max(rss) <= budget),
            },
            "worker_rss_mb": {"start": round(wrss[0], 1), "peak": round(max(wrss), 1), f"after_{idle_s:.0f}s": end[1]},
            # what the budget counts: the server and its workers, sampled together
            "server_and_workers_peak_mb": round(max(a + b for a, b in zip(rss, wrss)), 1),
            "server_and_workers_mb": {
                "start": round(rss[0] + wrss[0], 1),
                "peak": round(max(a + b for a, b in zip(rss, wrss)), 1),
                f"after_{idle_s:.0f}s": round(sum(end), 1),
                "back_within_10pct": bool(sum(end) <= 1.1 * (rss[0] + wrss[0])),
                "under_budget_every_sample": bool(all(a + b <= budget for a, b in zip(rss, wrss))),
            },
            "after_leaving": after,
            "pastes": longs,
        }
    for model in ("minilm", "smollm2"):
        rs = [r for r in recs if r["model"] == model]
        out["models"][model] = {
            "layer_change_s": summary([x for r in rs for x in r["layer_s"]]),
            "new_sentence_s": summary([x for r in rs for x in r["sentence_s"]]),
            "bytes_per_rerun": summary([x for r in rs for x in r["bytes"]]),
            "errors": sum(r["errors"] for r in rs),
            "crashes": [r["crash"] for r in rs if "crash" in r],
            "replies_without_heatmaps": sum(r["no_heatmaps"] for r in rs),
            "alerts": {a: sum(r["alerts"].get(a, 0) for r in rs) for a in {a for r in rs for a in r["alerts"]}},
        }
    print(json.dumps(out, indent=1), file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--visitors", type=int, default=7)
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument(
        "--configs",
        nargs="*",
        default=["gc=false", "gc=true"],
        help="gc=false|true: STREAMLIT_RUNNER_POST_SCRIPT_GC for that server; wscomp=true|false: "
        "STREAMLIT_SERVER_ENABLE_WEBSOCKET_COMPRESSION (permessage-deflate); procs=N: N app processes "
        "behind nginx (scripts/serve_many.sh)",
    )
    ap.add_argument("--long", type=int, default=0, help="visitors pasting a ~4,000-token text each (issue 29)")
    ap.add_argument("--idle", type=float, default=120.0, help="seconds after the last visitor left (--long)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--log-dir", default="/tmp")
    ap.add_argument("--py-spy", type=float, default=0.0, help="seconds of py-spy on the server during the load")
    args = ap.parse_args()
    results = []
    for c in args.configs:
        key, _, value = c.partition("=")
        env = {
            "gc": {"STREAMLIT_RUNNER_POST_SCRIPT_GC": value},
            "wscomp": {"STREAMLIT_SERVER_ENABLE_WEBSOCKET_COMPRESSION": value},
            "max": {"NORMVIZ_MAX_TOKENS": value},
        }.get(key, {})
        processes = int(value) if key == "procs" else 1
        results.append(
            run_config(c, env, args.visitors, args.seconds, args.log_dir, args.py_spy, processes, args.long, args.idle)
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    for r in results:
        print(
            f"{r['config']}: load avg {r['load_avg']}, mixed views {r['mixed_views']}, server RSS {r['server_rss_mb']}"
        )
        if r.get("long"):
            print(f"  long pastes: {json.dumps({k: v for k, v in r['long'].items() if k != 'pastes'})}")
            for p in r["long"]["pastes"]:
                print(
                    f"    paste: open {p['open_s']} s, layers {p['layer_s']}, charts {p['charts']}, errors "
                    f"{p['errors']} {p.get('crash', '')} {p['alerts'][:3]}"
                )
        if r.get("profile"):
            print(f"  py-spy: {r['profile']}")
        for model, m in r["models"].items():
            print(
                f"  {model}: layer change {m['layer_change_s']}, new sentence {m['new_sentence_s']}, "
                f"bytes/rerun {m['bytes_per_rerun']}, errors {m['errors']} (solo {r['solo'][model]})"
            )


if __name__ == "__main__":
    main()
