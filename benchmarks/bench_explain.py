"""Prediction attribution's time against the model's own forward pass, a fresh session per repeat (issues 19, 30).

    python benchmarks/bench_explain.py [--model smollm2] [--tokens 64 256 1024] [--repeat 3]
    python benchmarks/bench_explain.py --once 4096        # one fresh explain + sources, its time and peak RSS

For each length n, alternated in one process (:func:`benchmarks.timing.alternate`), medians of:
  forward   one plain forward pass of the model with its LM head (no hooks, no cache): the baseline
  record    the recording pass (:func:`normviz.record.recorder.record`: one pass with attentions, what a Session runs)
  direct    a FRESH Session + ``explain()``: its recording pass, total and the direct parts
  sources   a FRESH Session + ``explain()`` + ``sources``: the above and the backward pass
            (:mod:`normviz.attribution.adjoint`)
  next      the cached path, named as such: another candidate, foil and position's ``sources`` on a session
            that already explained once (one backward pass; the FF factors kept per text)
Prints each as seconds and as a ratio to the forward pass, and the load average before and after.
``--forward-reference N``: also time the forward propagation of every token's part (today's test reference,
[n, n+1, d] per layer) once at n ≤ N.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from bench_methods import TEXT  # noqa: E402
from timing import alternate  # noqa: E402

import normviz  # noqa: E402
from normviz.attribution import propagate  # noqa: E402
from normviz.core.tokens import pad_batch  # noqa: E402
from normviz.record.recorder import record  # noqa: E402
from normviz.session.session import Session  # noqa: E402


def encode_exactly(lm, n: int):
    """The benchmarks' text repeated as often as it takes and truncated to n tokens."""
    import warnings

    from normviz.core.errors import TruncationWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", TruncationWarning)
        return normviz.core.tokens.encode(lm.tokenizer, " ".join([TEXT] * (n // 20 + 2)), None, max_length=n)


def fresh_sources(lm, enc):
    session = Session.from_encoded(lm, [enc])[0]
    e = session.explain()
    e.sources  # noqa: B018 - computing it is the point
    return session, e


def measure(lm, n: int, repeat: int) -> dict:
    enc = encode_exactly(lm, n)
    ids, mask = pad_batch([enc])
    held, _ = fresh_sources(lm, enc)
    k = [0]

    def forward():
        with torch.no_grad():
            lm.head_model(input_ids=ids, attention_mask=mask, use_cache=False)

    def following():  # a different candidate each time, so nothing of the Explanation is reused
        k[0] += 1
        held.explain(token=100 + k[0], foil=7, position=-1 - (k[0] % 3)).sources  # noqa: B018

    steps = {
        "forward": forward,
        "record": lambda: record(lm, ids, mask),
        "direct": lambda: Session.from_encoded(lm, [enc])[0].explain(),
        "sources": lambda: fresh_sources(lm, enc),
        "next": following,
    }
    _, med = alternate(steps, repeat)
    return {"n": len(enc.ids), **{f"{k}_s": v for k, v in med.items()}}


def forward_reference(lm, n: int) -> float:
    enc = encode_exactly(lm, n)
    session = Session.from_encoded(lm, [enc])[0]
    session.layers()
    t0 = time.perf_counter()
    propagate.output_parts(session.layers())
    return time.perf_counter() - t0


def once(lm, n: int) -> None:
    enc = encode_exactly(lm, n)
    t0 = time.perf_counter()
    session, e = fresh_sources(lm, enc)
    wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB → GiB
    rows = e.sources_by_layer
    print(
        f"n = {len(enc.ids)}: fresh session + explain + sources {wall:.1f} s, peak RSS {rss:.2f} GiB; "
        f"Σ sources + bias − total = {e.sources.sum() + e.bias - e.total:.2e} (total {e.total:.4f}); "
        f"rows {rows.shape}, α recorded: {session.layers()[0].rec.attn is not None}",
        flush=True,
    )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tokens", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--once", type=int, default=None, help="one fresh explain + sources at this length")
    ap.add_argument(
        "--forward-reference",
        type=int,
        default=0,
        help="also time the forward propagation of the parts once up to this length",
    )
    args = ap.parse_args(argv)
    lm = normviz.load(args.model, dtype=args.dtype)
    print(
        f"{args.model} ({args.dtype}), torch {torch.__version__}, {platform.machine()}, "
        f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    if args.once:
        once(lm, args.once)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        return
    print(
        "| n | forward (s) | record / fwd | fresh explain / fwd | fresh explain + sources / fwd | next candidate / "
        "fwd |" + (" forward propagation (s) |" if args.forward_reference else "")
    )
    print("|---|---|---|---|---|---|" + ("---|" if args.forward_reference else ""))
    for n in args.tokens:
        r = measure(lm, n, args.repeat)
        f = r["forward_s"]
        ref = ""
        if args.forward_reference:
            ref = f" {forward_reference(lm, n):.1f} |" if n <= args.forward_reference else " — |"
        print(
            f"| {r['n']} | {f:.3f} | {r['record_s'] / f:.2f} | {r['direct_s'] / f:.2f} "
            f"| {r['sources_s'] / f:.2f} ({r['sources_s']:.2f} s) | {r['next_s'] / f:.2f} |{ref}",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
