"""Issue 38: the embedded gemma3's cost against its own forward pass, with smollm2 beside it in the same run.

Per n (one process; each configuration alternated ``--repeats`` times after one warm-up, :func:`timing.alternate`;
a fresh session per repeat, so the recording pass and the output arrays are counted):
  <model> forward      the model's forward pass with attentions (output_attentions=True, eager)
  <model> norms        normviz's recording pass + the norm family (attention, norm, norm_layer, attn_res,
                       attn_res_ln): ``Session.from_encoded(lm, [enc])[0].get(KEYS)``
  <model> plain        the model with its LM head, no attentions (one logits pass)
  <model> explain      ``Session(...).explain(position=-1)`` with its ``sources`` read (the backward pass)
Ratios: norms / forward (issue 38's target on gemma3: ≤ 1.5×) and explain / plain (≤ 3×), each model's beside the
other's. ``--load``: also ``normviz.load("gemma3")`` in a fresh subprocess (wall and CPU seconds; target ≤ 10 s).

    python benchmarks/bench_arch_gemma3.py [--n 64 256 1024] [--repeats 3] [--models gemma3 smollm2] [--load]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
KEYS = ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"]
TEXT = "The capital of France is Paris, and the river that runs through it is the Seine. " * 200


def load_time() -> dict:
    code = (
        "import time; t0 = time.perf_counter(); c0 = time.process_time(); import normviz; "
        "lm = normviz.load('gemma3'); print(time.perf_counter() - t0, time.process_time() - c0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    wall, cpu = map(float, out.stdout.split()[-2:])
    return {"load_wall_s": round(wall, 2), "load_cpu_s": round(cpu, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--models", nargs="+", default=["gemma3", "smollm2"])
    ap.add_argument("--load", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    import torch
    from timing import alternate

    import normviz
    from normviz.core.tokens import encode

    torch.set_grad_enabled(False)
    results: dict = {"load_average_before": os.getloadavg()[0]}
    if args.load:
        results.update(load_time())
        print(results, flush=True)
    models = {name: normviz.load(name) for name in args.models}
    for n in args.n:
        runs = {}
        for name, lm in models.items():
            enc = encode(lm.tokenizer, TEXT, None, max_length=n, decoder=True)
            ids = torch.tensor([enc.ids[:n]])

            def forward(lm=lm, ids=ids):
                lm.model(input_ids=ids, output_attentions=True, use_cache=False)

            def norms(lm=lm, enc=enc):
                normviz.Session.from_encoded(lm, [enc])[0].get(KEYS)

            def plain(lm=lm, ids=ids):
                lm.head_model(input_ids=ids, use_cache=False, logits_to_keep=1)

            def explain(lm=lm, enc=enc):
                e = normviz.Session.from_encoded(lm, [enc])[0].explain(position=-1)
                e.sources

            runs.update(
                {f"{name} forward": forward, f"{name} norms": norms, f"{name} plain": plain, f"{name} explain": explain}
            )
        t0 = time.perf_counter()
        times, med = alternate(runs, args.repeats)
        row = {
            "n": n,
            "seconds": round(time.perf_counter() - t0, 1),
            "load_average": os.getloadavg()[0],
            "median_s": {k: round(v, 4) for k, v in med.items()},
        }
        for name in models:
            row[f"{name} norms/forward"] = round(med[f"{name} norms"] / med[f"{name} forward"], 3)
            row[f"{name} explain/plain"] = round(med[f"{name} explain"] / med[f"{name} plain"], 3)
        results[f"n={n}"] = row
        print(json.dumps(row), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
