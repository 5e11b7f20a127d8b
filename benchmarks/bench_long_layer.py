"""One long-view layer change, measured in Python (no Streamlit): ``Session.maps(DEFAULT_MAPS, layer, None)``
on smollm2 at n ≈ 4000 — its CPU seconds (process_time) and the RSS growth (psutil, sampled every 5 ms) while
one layer is computed (the maps are not held meanwhile, as in the app: the previous layer's leave the cache
first), then the CPU seconds of the four panels' overviews (``long_maps.long_panels``, 256 cells, shares, special
tokens shown: the app's defaults; served from the layer cache, so the overviews alone). The server fixes glibc's
mmap threshold as the app does (``ui.memory.bound_heap``). Usage: python benchmarks/bench_long_layer.py [--n 4000]
[--layers 3 4 5] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time

import psutil


def rss_peak_during(fn):
    """(result, peak RSS growth in MB over the RSS at the start) of fn(), RSS sampled every 5 ms."""
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    done = threading.Event()

    def watch():
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.005)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    try:
        res = fn()
    finally:
        done.set()
        t.join()
    return res, (max(peak[0], proc.memory_info().rss) - base) / 2**20


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4000)
    ap.add_argument("--layers", type=int, nargs="+", default=[3, 4, 5])
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    import normviz
    from normviz.methods.norms import kernels
    from normviz.session.session import Session
    from normviz.ui.kit.memory import bound_heap
    from normviz.ui.kit.state import DEFAULT_MAPS
    from normviz.ui.views import long_maps

    bound_heap()
    kernels.warm()
    lm = normviz.load("smollm2")
    text = " ".join(
        f"Sentence {i} tells how the river {['rose', 'fell', 'turned'][i % 3]} near town {i % 17}."
        for i in range(args.n // 9 + 20)
    )
    s = Session(lm, text, max_tokens=args.n)
    c = time.process_time()
    before = psutil.Process().memory_info().rss
    s.layers("model")
    rec = time.process_time() - c
    records_mb = (psutil.Process().memory_info().rss - before) / 2**20
    rows = []
    for layer in args.layers:
        c, w = time.process_time(), time.perf_counter()
        if args.profile and layer == args.layers[-1]:
            import cProfile
            import pstats

            pr = cProfile.Profile()
            pr.enable()
            _, peak = rss_peak_during(lambda: s.maps(list(DEFAULT_MAPS), layer, None) and None)
            pr.disable()
            pstats.Stats(pr).sort_stats("cumulative").print_stats(25)
        else:
            _, peak = rss_peak_during(lambda: s.maps(list(DEFAULT_MAPS), layer, None) and None)
        maps_cpu = time.process_time() - c
        c2 = time.process_time()
        long_maps.long_panels(
            s, list(DEFAULT_MAPS), layer, None, False, "share", long_maps.OVERVIEW_CELLS, lm.is_causal
        )
        rows.append(
            {
                "layer": layer,
                "cpu_s": round(maps_cpu, 2),
                "wall_s": round(time.perf_counter() - w, 2),
                "rss_peak_growth_mb": round(peak),
                "overviews_cpu_s": round(time.process_time() - c2, 2),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    res = {
        "n": s.n_tokens,
        "record_cpu_s": round(rec, 1),
        "recording_rss_growth_mb": round(records_mb),
        "keys": list(DEFAULT_MAPS),
        "layers": rows,
        "rss_mb": round(psutil.Process().memory_info().rss / 2**20),
        "loadavg": os.getloadavg(),
        "threads": os.environ.get("OMP_NUM_THREADS"),
    }
    print(json.dumps(res))
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
