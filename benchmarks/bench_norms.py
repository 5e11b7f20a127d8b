"""Cost of the norm family (attention, norm, norm_layer, attn_res, attn_res_ln) relative to the forward pass.

For each model size and n: (a) the model's forward pass with attentions (``output_attentions=True``, eager) and
(c) normviz's recording pass plus the norm family (``Session.from_encoded(lm, [enc])[0].get(keys)``: a fresh
session each time, so the forward pass, the maps and their fresh output arrays are all counted), taken
alternately in one process after one warm-up of each; ratio = median(c) / median(a). Target: ≤ 2.
Each (model, n) runs in its own subprocess. On a shared 2-core machine whose speed drifts by ±20 %, only the
alternating ratio means much; the absolute seconds are indicative.

Models (random weights, float32, CPU): bert-base-sized (12 layers, 12 heads, d=768, d_ff=3072) and
minilm-sized (6 layers, 12 heads, d=384, d_ff=1536, head_dim 32).

    python benchmarks/bench_norms.py [--models bert-base minilm] [--n 32 128 512] [--repeats 7] [--markdown]
        [--json out.json] [--profile]   (--profile: also the norm family alone, per step, on the same inputs)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import alternate  # noqa: E402

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
    from normviz.tokens import Encoded

    torch.manual_seed(0)
    cfg = tf.BertConfig(max_position_embeddings=512, vocab_size=30522, **SIZES[model_name])
    cfg._attn_implementation = "eager"
    model = tf.BertModel(cfg, add_pooling_layer=False).eval()
    lm = normviz.from_model(model, None, name=f"{model_name}-random")
    ids = torch.randint(1000, 30000, (1, n))
    enc = Encoded(ids=ids[0].tolist(), tokens=[""] * n, labels=[""] * n, special=[False] * n, dropped=0)
    return model, lm, ids, enc


def child(model_name: str, n: int, repeats: int, profile: bool) -> dict:
    import torch

    import normviz

    torch.set_grad_enabled(False)
    model, lm, ids, enc = build(model_name, n)
    runs = {
        "forward": lambda: model(input_ids=ids, output_attentions=True),
        "norms": lambda: normviz.Session.from_encoded(lm, [enc])[0].get(KEYS),
    }
    _, _, ids8, enc8 = build(model_name, 8)
    normviz.Session.from_encoded(lm, [enc8])[0].get(KEYS)  # first-call costs: kernels loaded from numba's cache
    times, med = alternate(runs, repeats)  # warm-up at full size first (allocator, first large arrays' pages)
    row = {"model": model_name, "n": n, "forward_s": med["forward"], "norms_s": med["norms"],
           "ratio": med["norms"] / med["forward"], "repeats": repeats, "threads": torch.get_num_threads(),
           "ratios_each": [b / a for a, b in zip(times["forward"], times["norms"])]}
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--n", type=int, nargs="*", default=[32, 128, 512])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--markdown", action="store_true", help="print the results as a markdown table")
    ap.add_argument("--profile", action="store_true", help="also time the recording pass and each family alone")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", nargs=3, metavar=("MODEL", "N", "REPEATS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]), int(args.child[2]), args.profile)))
        return
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    rows = []
    for model_name in args.models:
        for n in args.n:
            reps = args.repeats if n < 512 or model_name != "bert-base" else max(3, args.repeats - 2)
            cmd = [sys.executable, __file__, "--child", model_name, str(n), str(reps)] + (["--profile"] * args.profile)
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if proc.returncode != 0:
                err = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
                print(f"{model_name:9s} n={n:4d} failed: {err}", flush=True)
                continue
            row = json.loads(proc.stdout.strip().splitlines()[-1])
            rows.append(row)
            spread = f"{min(row['ratios_each']):.2f}–{max(row['ratios_each']):.2f}"
            line = (f"{model_name:9s} n={n:4d} forward {row['forward_s']:7.3f} s  forward+norms {row['norms_s']:7.3f} s"
                    f"  ratio {row['ratio']:5.2f} (pairs {spread})")
            if "profile" in row:
                p = row["profile"]
                line += f"  | record {p['record']:.3f} attention {p['attention']:.3f} norms {p['norm_family']:.3f}"
            print(line, flush=True)
    if args.markdown:
        print("\n| model | n | forward + attentions | + norm family | ratio (median) | ratio per pair, min–max |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in rows:
            print(f"| {r['model']} | {r['n']} | {r['forward_s']:.3f} s | {r['norms_s']:.3f} s | {r['ratio']:.2f}× "
                  f"| {min(r['ratios_each']):.2f}–{max(r['ratios_each']):.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
