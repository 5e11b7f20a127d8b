"""Cost and steadiness of the norm family (attention, norm, norm_layer, attn_res, attn_res_ln) against the forward pass.

For each (model, n), in its own subprocess, three configurations alternated ``--repeats`` times (15) after one
warm-up of each:
  forward   the model's forward pass with attentions (``output_attentions=True``, eager);
  norms     normviz's recording pass plus the norm family, ``Session.from_encoded(lm, [enc])[0].get(keys)``: a
            fresh session each time, so the forward pass, the maps and their output arrays are all counted;
  no pool   the same with :mod:`normviz.core.pool` off (``max_idle_bytes = 0``): fresh arrays and scratch for every
            analysis, as before the pool (the baseline of the churn).
Per configuration: the median, 90th percentile (nearest rank: the 14th of 15) and maximum wall time, the ratio
of medians to the forward pass, and per run the minor page faults (``ru_minflt``), the kernel CPU seconds
(``ru_stime``) and the process's CPU seconds (``process_time``; with ``--threads 1`` their ratio, "cpu ratio",
is the work ratio, which a loaded machine inflates far less than the wall times) — the first two independent
of the machine's load, unlike the times. Targets (issue 24): norms median
≤ 1.3× forward, norms p90 ≤ 1.3× its median, with no allocator variable in the environment (the script warns
when one of glibc's ``MALLOC_*`` variables is set).
On a shared 2-core machine whose speed drifts, only the alternated figures mean much; the load average before
and after each (model, n) is printed.

Models (random weights, float32, CPU): bert-base-sized (12 layers, 12 heads, d=768, d_ff=3072) and
minilm-sized (6 layers, 12 heads, d=384, d_ff=1536, head_dim 32).

    python benchmarks/bench_norms.py [--cases minilm:32 minilm:128 minilm:256 minilm:512 bert-base:512]
        [--repeats 15] [--threads T] [--markdown] [--json out.json] [--profile]   (--profile: per step)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"]
SIZES = {
    "bert-base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
}


def build(model_name: str, n: int):
    import torch
    import transformers as tf

    import normviz
    from normviz.core.tokens import Encoded

    torch.manual_seed(0)
    cfg = tf.BertConfig(max_position_embeddings=512, vocab_size=30522, **SIZES[model_name])
    cfg._attn_implementation = "eager"
    model = tf.BertModel(cfg, add_pooling_layer=False).eval()
    lm = normviz.from_model(model, None, name=f"{model_name}-random")
    ids = torch.randint(1000, 30000, (1, n))
    enc = Encoded(ids=ids[0].tolist(), tokens=[""] * n, labels=[""] * n, special=[False] * n, dropped=0)
    return model, lm, ids, enc


def percentile(values, q: float) -> float:
    """Nearest-rank percentile (q = 0.9 of 15 runs: the 14th smallest)."""
    v = sorted(values)
    return v[max(0, math.ceil(round(q * len(v), 9)) - 1)]


def child(model_name: str, n: int, repeats: int, profile: bool) -> dict:
    import torch

    import normviz
    from normviz.core import pool

    torch.set_grad_enabled(False)
    threads = int(os.environ.get("BENCH_THREADS", "0"))
    if threads:  # torch's and the kernels' threads (--threads)
        import numba

        torch.set_num_threads(threads)
        numba.set_num_threads(threads)
    model, lm, ids, enc = build(model_name, n)
    idle = pool.POOL.max_idle_bytes

    def norms(pooled: bool):
        def run():
            pool.POOL.max_idle_bytes = idle if pooled else 0
            normviz.Session.from_encoded(lm, [enc])[0].get(KEYS)

        return run

    runs = {
        "forward": lambda: model(input_ids=ids, output_attentions=True),
        "norms": norms(True),
        "no_pool": norms(False),
    }
    _, _, ids8, enc8 = build(model_name, 8)
    normviz.Session.from_encoded(lm, [enc8])[0].get(KEYS)  # first-call costs: kernels loaded from numba's cache
    for run in runs.values():  # warm-up at full size (allocator, first large arrays' pages)
        run()
    stats = {c: {"s": [], "faults": [], "sys_s": [], "cpu_s": []} for c in runs}
    for _ in range(repeats):
        for c, run in runs.items():
            r0, c0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
            run()
            t1, c1, r1 = time.perf_counter(), time.process_time(), resource.getrusage(resource.RUSAGE_SELF)
            stats[c]["s"].append(t1 - t0)
            stats[c]["cpu_s"].append(c1 - c0)
            stats[c]["faults"].append(r1.ru_minflt - r0.ru_minflt)
            stats[c]["sys_s"].append(r1.ru_stime - r0.ru_stime)
    pool.POOL.max_idle_bytes = idle
    row = {"model": model_name, "n": n, "repeats": repeats, "threads": torch.get_num_threads()}
    for c, st in stats.items():
        row[c] = {
            "median_s": statistics.median(st["s"]),
            "p90_s": percentile(st["s"], 0.9),
            "max_s": max(st["s"]),
            "faults": statistics.median(st["faults"]),
            "sys_s": statistics.median(st["sys_s"]),
            "cpu_s": statistics.median(st["cpu_s"]),
            "each_s": st["s"],
        }
    for c in ("norms", "no_pool"):
        row[c]["ratio"] = row[c]["median_s"] / row["forward"]["median_s"]
        row[c]["cpu_ratio"] = row[c]["cpu_s"] / row["forward"]["cpu_s"]
        row[c]["p90_over_median"] = row[c]["p90_s"] / row[c]["median_s"]
    if profile:
        row["profile"] = profile_steps(lm, enc, repeats)
    return row


def profile_steps(lm, enc, repeats: int) -> dict:
    """Median seconds of: the recording pass alone, then the two families on already recorded layers."""
    import normviz
    from normviz.methods import norms, weights
    from normviz.methods.base import Inputs

    out = {"record": [], "attention": [], "norm_family": []}
    for _ in range(repeats):
        s = normviz.Session.from_encoded(lm, [enc])[0]
        t0 = time.perf_counter()
        layers = s.layers()
        t1 = time.perf_counter()
        inp = Inputs(request=s.request, layer_views=lambda: layers, arrays={})
        att = weights.compute(inp, ["attention"], {}).arrays
        t2 = time.perf_counter()
        inp = Inputs(request=s.request, layer_views=lambda: layers, arrays=att)
        norms.compute(inp, KEYS[1:], {})
        t3 = time.perf_counter()
        for c, v in zip(out, (t1 - t0, t2 - t1, t3 - t2)):
            out[c].append(v)
    return {c: statistics.median(v) for c, v in out.items()}


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--cases",
        nargs="*",
        default=["minilm:32", "minilm:128", "minilm:256", "minilm:512", "bert-base:512"],
        help="MODEL:N pairs",
    )
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--markdown", action="store_true", help="print the results as a markdown table")
    ap.add_argument("--profile", action="store_true", help="also time the recording pass and each family alone")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch and kernel threads (0: their defaults); 1 is "
        "steadier on a loaded machine, where threads that wait for each other at every step stall",
    )
    ap.add_argument("--child", nargs=3, metavar=("MODEL", "N", "REPEATS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), int(args.child[2]), args.profile)))
        return
    malloc = sorted(k for k in os.environ if k.startswith("MALLOC_"))
    if malloc:
        print(
            f"warning: allocator variables set ({', '.join(malloc)}): the targets are for an environment without them"
        )
    env = dict(
        os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), BENCH_THREADS=str(args.threads)
    )
    rows = []
    for case in args.cases:
        model_name, n = case.split(":")[0], int(case.split(":")[1])
        if model_name not in SIZES:
            raise SystemExit(f"unknown model {model_name!r}; one of {', '.join(SIZES)}")
        before = loadavg()
        cmd = [sys.executable, __file__, "--child", model_name, str(n), str(args.repeats)] + (
            ["--profile"] * args.profile
        )
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            err = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
            print(f"{model_name:9s} n={n:4d} failed: {err}", flush=True)
            continue
        row = json.loads(proc.stdout.strip().splitlines()[-1])
        row["load_before"], row["load_after"] = before, loadavg()
        rows.append(row)
        f, c, b = row["forward"], row["norms"], row["no_pool"]
        line = f"{model_name:9s} n={n:4d} load {before} → {row['load_after']}\n" + "".join(
            f"  {name:8s} median {r['median_s'] * 1e3:8.1f} ms  p90 {r['p90_s'] * 1e3:8.1f}  max "
            f"{r['max_s'] * 1e3:8.1f}  faults {r['faults']:7.0f}  sys {r['sys_s'] * 1e3:6.1f} ms"
            f"  cpu {r['cpu_s'] * 1e3:8.1f} ms"
            + (
                f"  ratio {r['ratio']:.2f}  p90/median {r['p90_over_median']:.2f}  cpu ratio {r['cpu_ratio']:.2f}"
                if "ratio" in r
                else ""
            )
            + "\n"
            for name, r in (("forward", f), ("norms", c), ("no pool", b))
        )
        if "profile" in row:
            p = row["profile"]
            line += (
                f"  profile: record {p['record']:.3f} attention {p['attention']:.3f} norms {p['norm_family']:.3f} s\n"
            )
        print(line, end="", flush=True)
    if args.markdown:
        print(
            "\n| model | n | forward + attentions, median | + norm family: median, p90, max | ratio | p90/median "
            "| faults per run: forward, norms, no pool | no pool: median, p90, ratio | load before → after |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            f, c, b = r["forward"], r["norms"], r["no_pool"]
            print(
                f"| {r['model']} | {r['n']} | {f['median_s'] * 1e3:.1f} ms | {c['median_s'] * 1e3:.1f}, "
                f"{c['p90_s'] * 1e3:.1f}, {c['max_s'] * 1e3:.1f} ms | {c['ratio']:.2f}× | {c['p90_over_median']:.2f} "
                f"| {f['faults']:.0f}, {c['faults']:.0f}, {b['faults']:.0f} | {b['median_s'] * 1e3:.1f}, "
                f"{b['p90_s'] * 1e3:.1f} ms, {b['ratio']:.2f}× | {r['load_before']} → {r['load_after']} |"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
