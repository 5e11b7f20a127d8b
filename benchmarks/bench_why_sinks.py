"""The Why page's sinks panel (issue 29): ``normviz.methods.sinks.first_token_shares`` (one layer's α at a time from the
records) against the former path (``Session.get(["attention", "norm"])`` then the shares of whole float64 copies
of both [L, H, n, n] maps) on smollm2 — CPU seconds and the RSS growth (psutil, sampled every 5 ms) of each, each
on a fresh session of the same text (recorded first: the recording is the page's anyway). The largest
difference between the two results is printed too. Usage: python benchmarks/bench_why_sinks.py [--n 900]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import numpy as np
from bench_long_layer import rss_peak_during


def old_shares(session):
    a = session.get(["attention", "norm"])

    def share(m):
        m = np.abs(np.asarray(m, dtype=np.float64))
        tot = m.sum(-1)
        return np.where(tot > 0, m[..., 0] / np.where(tot > 0, tot, 1), 0).mean(-1)

    return share(a["attention"]), share(a["norm"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=900)
    p.add_argument("--model", default="smollm2")
    p.add_argument("--new-only", action="store_true", help="the per-layer path only (no 5 GB whole maps)")
    args = p.parse_args(argv)
    import normviz
    import normviz.methods.sinks
    from normviz.ui.kit.memory import bound_heap

    bound_heap()
    lm = normviz.load(args.model)
    words = (
        "the river carried small boats past the old mill while children counted them from the bridge and "
        "their parents talked about the harvest "
    ).split()
    text = " ".join(words[i % len(words)] for i in range(args.n))
    out = {"load_average": os.getloadavg(), "model": args.model}
    got = {}
    runs = (("per_layer", normviz.methods.sinks.first_token_shares), ("whole_maps", old_shares))
    for name, fn in runs[:1] if args.new_only else runs:
        s = normviz.Session(lm, text, max_tokens=args.n + 8)
        s.records()
        gc.collect()
        t0, w0 = time.process_time(), time.perf_counter()
        res, mb = rss_peak_during(lambda s=s: fn(s))  # bound now: s is deleted below
        out[name] = {
            "cpu_s": round(time.process_time() - t0, 2),
            "wall_s": round(time.perf_counter() - w0, 2),
            "rss_growth_mb": round(mb, 1),
            "estimate_s": round(normviz.methods.sinks.estimate_s(s.request, {}), 2),
        }
        got[name] = res
        out["n_tokens"] = s.n_tokens
        del s
        gc.collect()
    if len(got) == 2:
        out["max_abs_diff"] = float(max(np.abs(a - b).max() for a, b in zip(got["per_layer"], got["whole_maps"])))
    out["load_average_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
