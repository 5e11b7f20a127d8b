"""Wall time and peak memory of normviz's maps against a plain forward pass and a naive implementation.

  (a) forward pass with attentions      (b) normviz, all per-layer keys (attention … ff_res_ln)
  (c) normviz without the FF keys       (d) naive per-pair tensors (authors' style), same keys as (c)

Model: random BERT-base-sized encoder (12 layers, 12 heads, d=768, d_ff=3072), float32, CPU.
Each configuration runs in its own subprocess, after one call on 8 tokens (libraries and compiled kernels
loaded): peak memory = peak RSS during the first full-size run (VmHWM, reset just before it) minus RSS before
it (model loaded); time = median of the repeats.
The c/a ratio comes from one more subprocess that alternates (a) and (c) on the same model (after one
warm-up of each) and divides the medians: both see the same machine state, which on a shared 2-core VM
varies by ±20 % from minute to minute.

    python benchmarks/bench_maps.py [--n 32 128 512] [--repeats 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alternate  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = ("a_forward", "b_all", "c_no_ff", "d_naive")


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) so the peak covers only what follows (Linux)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _peak_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _build(n: int):
    import torch
    import transformers as tf

    import normviz

    torch.manual_seed(0)
    cfg = tf.BertConfig(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
        vocab_size=30522,
    )
    model = tf.BertModel(cfg, add_pooling_layer=False).eval()
    model.config._attn_implementation = "eager"
    lm = normviz.from_model(model, None, name="bert-base-random")
    ids = torch.randint(1000, 30000, (1, n))
    return torch, model, lm, ids


def _runner(config: str, lm, model, ids, torch):
    from normviz import Session
    from normviz.core.tokens import Encoded

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from naive import naive_bert_maps

    def analyze_encoded(lm, encs, methods):  # a fresh session each call: recording pass included
        return [s.get(methods) for s in Session.from_encoded(lm, encs)]

    enc = Encoded(
        ids=ids[0].tolist(),
        tokens=[""] * ids.shape[1],
        labels=[""] * ids.shape[1],
        special=[False] * ids.shape[1],
        dropped=0,
    )
    no_ff = ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"]
    all_keys = no_ff + ["ff", "ff_res", "ff_res_ln"]  # every per-layer key of the README's table
    if config == "a_forward":
        return lambda: model(input_ids=ids, output_attentions=True)
    if config == "b_all":
        return lambda: analyze_encoded(lm, [enc], methods=all_keys)
    if config == "c_no_ff":
        return lambda: analyze_encoded(lm, [enc], methods=no_ff)
    return lambda: naive_bert_maps(model, ids)


def child(config: str, n: int, repeats: int) -> dict:
    torch, model, lm, ids = _build(n)
    torch.set_grad_enabled(False)
    run = _runner(config, lm, model, ids, torch)
    _runner(config, lm, model, ids[:, :8], torch)()  # load what a first call loads (kernels), on 8 tokens
    import gc

    gc.collect()
    before = _rss_mb()
    _reset_peak()
    t0 = time.perf_counter()
    result = run()
    first = time.perf_counter() - t0
    peak = _peak_mb() - before
    del result
    times = [first]
    for _ in range(repeats - 1):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return {
        "config": config,
        "n": n,
        "seconds": statistics.median(times),
        "peak_mb": max(peak, 0.0),
        "threads": torch.get_num_threads(),
    }


def paired(n: int, repeats: int) -> dict:
    """Median wall time of (a) and (c) taken alternately in one process, and their ratio."""
    torch, model, lm, ids = _build(n)
    torch.set_grad_enabled(False)
    runs = {c: _runner(c, lm, model, ids, torch) for c in ("a_forward", "c_no_ff")}
    _, med = alternate(runs, repeats)  # warm-up first: first-call costs (kernels, allocator) are not per-analysis
    return {
        "n": n,
        "a_seconds": med["a_forward"],
        "c_seconds": med["c_no_ff"],
        "ratio": med["c_no_ff"] / med["a_forward"],
        "repeats": repeats,
    }


def check_agreement(n: int = 48) -> float:
    """Max relative difference between normviz and the naive implementation (sanity check of the baseline)."""
    torch, model, lm, ids = _build(n)
    from normviz import Session

    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    from naive import naive_bert_maps

    from normviz.core.tokens import Encoded

    enc = Encoded(ids=ids[0].tolist(), tokens=[""] * n, labels=[""] * n, special=[False] * n, dropped=0)
    ours = Session.from_encoded(lm, [enc])[0].get(["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"])
    ref = naive_bert_maps(model, ids)
    worst = 0.0
    for k, layers in ref.items():
        r = torch.stack(layers).numpy()
        worst = max(worst, float(abs(ours[k] - r).max() / abs(r).max()))
    return worst


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="*", default=[32, 128, 512])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--configs", nargs="*", default=list(CONFIGS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--paired-repeats", type=int, default=9, help="alternations of (a) and (c) for the c/a ratio")
    ap.add_argument("--child", nargs=3, metavar=("CONFIG", "N", "REPEATS"), help=argparse.SUPPRESS)
    ap.add_argument("--paired", nargs=2, metavar=("N", "REPEATS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), int(args.child[2]))))
        return
    if args.paired:
        print(json.dumps(paired(int(args.paired[0]), int(args.paired[1]))))
        return
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    print(f"agreement normviz vs naive (n=48): max relative difference {check_agreement():.2e}", flush=True)
    rows = []
    for n in args.n:
        for config in args.configs:
            reps = 1 if (config in ("b_all", "d_naive") and n >= 512) else args.repeats
            proc = subprocess.run(
                [sys.executable, __file__, "--child", config, str(n), str(reps)],
                capture_output=True,
                text=True,
                env=env,
            )
            if proc.returncode != 0:
                row = {
                    "config": config,
                    "n": n,
                    "seconds": float("nan"),
                    "peak_mb": float("nan"),
                    "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}",
                }
            else:
                row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            print(
                f"n={n:4d} {config:10s} {row['seconds']:9.3f} s  peak +{row['peak_mb']:9.1f} MB"
                + (f"  ({row['error']})" if "error" in row else ""),
                flush=True,
            )
    pairs = []
    if {"a_forward", "c_no_ff"} <= set(args.configs):
        print(f"\nc/a, alternating (a) and (c) in one process ({args.paired_repeats} each, medians):")
        for n in args.n:
            proc = subprocess.run(
                [sys.executable, __file__, "--paired", str(n), str(args.paired_repeats)],
                capture_output=True,
                text=True,
                env=env,
            )
            if proc.returncode != 0:
                print(
                    f"n={n:4d} failed: "
                    f"{proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode}"
                )
                continue
            p = json.loads(proc.stdout.strip().splitlines()[-1])
            pairs.append(p)
            print(
                f"n={n:4d} (a) {p['a_seconds']:7.3f} s  (c) {p['c_seconds']:7.3f} s  c/a {p['ratio']:5.2f}", flush=True
            )
    print("\nratios (same run; c/a from the alternating measurement):")
    print(f"{'n':>5} {'c/a time':>9} {'b/a time':>9} {'d/c time':>9} {'d/c peak':>9}")
    for n in args.n:
        r = {row["config"]: row for row in rows if row["n"] == n}
        if not all(c in r for c in CONFIGS):
            continue
        a, b, c, d = (r[k] for k in CONFIGS)
        ca = next((p["ratio"] for p in pairs if p["n"] == n), c["seconds"] / a["seconds"])
        print(
            f"{n:5d} {ca:9.2f} {b['seconds'] / a['seconds']:9.2f} "
            f"{d['seconds'] / c['seconds']:9.2f} {d['peak_mb'] / max(c['peak_mb'], 1e-9):9.1f}"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"configs": rows, "paired": pairs}, f, indent=1)


if __name__ == "__main__":
    main()
