"""Prediction attribution's time against the model's own forward pass, in one run (issue 19).

    python benchmarks/bench_explain.py [--model smollm2] [--tokens 16 64 256] [--sources-max 64] [--repeat 3]

For each length n, alternated in one process (:func:`benchmarks.timing.alternate`), medians:
  forward   the recording pass (:func:`normviz.record.record`: one pass with attentions, what a Session runs)
  predict   ``predict(top=10)`` on the recorded session (the LM head at one position)
  lens      ``logit_lens()`` (final norm + head on L+1 states of one position)
  direct    ``explain()`` without touching ``sources``: total + heads/attn_bias/ff/embedding/final_bias
  sources   the propagated parts (O(n²·d·(d + d_ff)) per layer), up to ``--sources-max`` tokens
Prints each as seconds and as a ratio to the forward pass, the FLOPs estimate ``sources`` is checked with
(:func:`normviz.attribution.propagate.flops`) and the rate it achieved, and the load average.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

import normviz  # noqa: E402
from normviz.attribution import propagate  # noqa: E402
from normviz.record import record  # noqa: E402
from normviz.session import Session  # noqa: E402
from normviz.tokens import pad_batch  # noqa: E402

from bench_methods import encode_exactly  # noqa: E402
from timing import alternate  # noqa: E402


def measure(lm, n: int, repeat: int, with_sources: bool) -> dict:
    enc = encode_exactly(lm, n)
    ids, mask = pad_batch([enc])
    session = Session.from_encoded(lm, [enc])[0]
    session.layers()  # recorded once; every step below reads these records

    def sources():
        e = session.explain()
        e.sources  # noqa: B018 - computing it is the point

    steps = {"forward": lambda: record(lm, ids, mask), "predict": lambda: session.predict(top=10),
             "lens": lambda: session.logit_lens(), "direct": lambda: session.explain()}
    if with_sources:
        steps["sources"] = sources
    _, med = alternate(steps, repeat)
    out = {"n": len(enc.ids), **{f"{k}_s": v for k, v in med.items()}}
    if with_sources:
        out["flops"] = propagate.flops(session.request)
        out["rate"] = out["flops"] / max(med["sources"] - med["direct"], 1e-9)
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tokens", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--sources-max", type=int, default=64, help="time sources only up to this many tokens")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)
    lm = normviz.load(args.model, dtype=args.dtype)
    print(f"{args.model} ({args.dtype}), torch {torch.__version__}, {platform.machine()}, "
          f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}")
    print("| n | forward (s) | predict / fwd | lens / fwd | direct parts / fwd | sources / fwd | sources FLOP/s |")
    print("|---|---|---|---|---|---|---|")
    for n in args.tokens:
        r = measure(lm, n, args.repeat, n <= args.sources_max)
        f = r["forward_s"]
        src = f"{r['sources_s'] / f:.0f}× ({r['sources_s']:.1f} s)" if "sources_s" in r else "—"
        rate = f"{r['rate']:.1e}" if "rate" in r else "—"
        print(f"| {r['n']} | {f:.3f} | {r['predict_s'] / f:.3f} | {r['lens_s'] / f:.3f} | {r['direct_s'] / f:.3f} "
              f"| {src} | {rate} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
