"""Long inputs (issue 20): the recording pass vs a plain forward pass, first and next ``Session.map``, peak RSS.

    python benchmarks/bench_long.py [--n 512 1024 2048 4096] [--llama1b 512 2048] [--reps 2]

Each case runs in its own subprocess (its peak RSS is its own, the model included). Per case, alternated in
one process: a plain forward pass (eager attention, no α returned: what the model costs at all), the same
with ``output_attentions=True`` (what recording α costs), and normviz's recording pass (q, k records above
256 MB of α, :mod:`normviz.record.attention_capture`); the fastest of ``--reps`` each. Then on the recorded
session: ``map("norm", 15)`` (first: includes nothing of the pass), ``map("norm", 16)`` (a next layer),
``map("attn_res_ln", 29)``, ``map("attention", 3, 4)``; one layer's share of the plain forward pass is
plain / L. ``--llama1b``: a random Llama-3.2-1B-shaped model (16 layers, d = 2048, 32 heads, 8 kv heads,
d_ff = 8192, vocabulary 32000) in bfloat16. Figures with the load average: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
TEXT = (
    "The river rose in the night and the town woke to water in the streets; the mayor, who had promised "
    "a wall for years, stood on the bridge and counted the boats. "
)


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def _llama1b(device: str = "cpu"):
    import torch
    import transformers as tf

    import normviz

    config = tf.LlamaConfig(
        hidden_size=2048,
        num_hidden_layers=16,
        num_attention_heads=32,
        num_key_value_heads=8,
        intermediate_size=8192,
        vocab_size=32000,
        max_position_embeddings=8192,
        rope_theta=500000.0,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = tf.AutoModel.from_config(config, attn_implementation="eager", dtype=torch.bfloat16).eval()
    return normviz.from_model(model, None, name="llama-1b-shaped")


def one(model: str, n: int, reps: int, device: str = "cpu", dtype: str | None = None) -> dict:
    import torch

    import normviz
    from normviz.core.tokens import Encoded
    from normviz.methods.norms import kernels
    from normviz.session.session import Session

    kernels.warm()  # compiled (or loaded from numba's cache) before anything is timed
    t0 = time.perf_counter()
    lm = normviz.load("smollm2", device=device, dtype=dtype) if model == "smollm2" else _llama1b(device)
    load_s = time.perf_counter() - t0
    if model == "smollm2":
        s0 = Session(lm, TEXT * (n // 30 + 2), max_tokens=n)
        enc = s0.encoded
    else:
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(5, 32000, (n,), generator=g).tolist()
        enc = Encoded(
            ids=ids, tokens=[str(i) for i in ids], labels=[str(i) for i in ids], special=[False] * n, dropped=0
        )
    assert len(enc.ids) == n, len(enc.ids)
    ids = torch.tensor([enc.ids], device=lm.device)
    mask = torch.ones_like(ids)
    L = lm.n_layers
    times = {"plain": [], "with_attentions": [], "record": []}
    sync = torch.cuda.synchronize if lm.device.type == "cuda" else (lambda: None)
    session = None
    for _ in range(reps):
        with torch.no_grad():
            t = time.perf_counter()
            lm.model(input_ids=ids, attention_mask=mask, use_cache=False)
            sync()
            times["plain"].append(time.perf_counter() - t)
            if n <= 2048 or model != "smollm2":  # 4096: [30, 9, n, n] α would be 18 GB
                t = time.perf_counter()
                out = lm.model(input_ids=ids, attention_mask=mask, use_cache=False, output_attentions=True)
                sync()
                times["with_attentions"].append(time.perf_counter() - t)
                del out
        session = Session.from_encoded(lm, [enc])[0]
        t = time.perf_counter()
        session.records()
        sync()
        times["record"].append(time.perf_counter() - t)
    best = {k: min(v) if v else None for k, v in times.items()}
    maps = {}
    mid, last = min(15, L - 2), L - 1
    for key, layer, head in (
        ("norm", mid, None),
        ("norm", mid + 1, None),
        ("attn_res_ln", last, None),
        ("attention", 3, 4),
        ("norm", mid, None),
    ):
        label = f"{key}[{layer}{'' if head is None else f', {head}'}]"
        label += " again" if label in maps else ""
        t = time.perf_counter()
        session.map(key, layer, head)
        maps[label] = round(time.perf_counter() - t, 3)
    rec = session.records()[0]
    qk = rec.attn is None
    return {
        "model": model,
        "dtype": str(lm.dtype).replace("torch.", ""),
        "n": n,
        "load_s": round(load_s, 1),
        "plain_s": round(best["plain"], 3),
        "with_attentions_s": round(best["with_attentions"], 3) if best["with_attentions"] else None,
        "record_s": round(best["record"], 3),
        "record_over_plain": round(best["record"] / best["plain"], 2),
        "layer_share_s": round(best["plain"] / L, 3),
        "records": "q, k" if qk else "α",
        "maps_s": maps,
        "next_map_over_layer_share": round(maps[f"norm[{mid + 1}]"] / (best["plain"] / L), 2),
        "peak_rss_gb": round(_peak_gb(), 2),
        "device": str(lm.device),
        "peak_gpu_gb": round(torch.cuda.max_memory_allocated() / 2**30, 2) if lm.device.type == "cuda" else None,
        "loadavg": open("/proc/loadavg").read().split()[:3],
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, nargs="*", default=[512, 1024, 2048, 4096])
    ap.add_argument("--llama1b", type=int, nargs="*", default=[])
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "N"))
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], int(args.one[1]), args.reps)))
        return
    cases = [("smollm2", n) for n in args.n] + [("llama1b", n) for n in args.llama1b]
    for model, n in cases:
        proc = subprocess.run(
            [sys.executable, __file__, "--one", model, str(n), "--reps", str(args.reps)],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(HERE)},
        )
        line = (
            proc.stdout.strip().splitlines()[-1]
            if proc.returncode == 0
            else f"{model} n={n} failed: {proc.stderr[-800:]}"
        )
        print(line, flush=True)


if __name__ == "__main__":
    main()
