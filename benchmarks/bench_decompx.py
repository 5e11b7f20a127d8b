"""DecompX's time against the model's own forward pass, in one run.

    python benchmarks/bench_decompx.py [--model minilm] [--tokens 32 128] [--repeat 3] [--dtype float32]

For each length n: the recording pass (:func:`normviz.record.recorder.record`, one pass with attentions) and the
``decompx`` family's compute on fresh per-layer views of the same records, alternated in one process
(:func:`benchmarks.timing.alternate`), medians. Prints the ratio decompx / forward, the FLOPs estimate that
``check`` uses (:func:`normviz.methods.decompx.flops`) and the rate it achieved (to compare with the rate the
budget assumes, ``normviz.methods.cost.RATES["decompx"]``), next to the rate of one plain GEMM of the
same shape as the FF projection, timed in the same alternation (the machine's speed at that moment).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
from bench_methods import encode_exactly  # noqa: E402
from timing import alternate  # noqa: E402

import normviz  # noqa: E402
from normviz.core.tokens import pad_batch  # noqa: E402
from normviz.methods import cost, decompx  # noqa: E402
from normviz.methods.base import Inputs  # noqa: E402
from normviz.record.recorder import record  # noqa: E402
from normviz.session.session import Session  # noqa: E402


def measure(lm, n: int, repeat: int) -> dict:
    enc = encode_exactly(lm, n)
    ids, mask = pad_batch([enc])
    session = Session.from_encoded(lm, [enc])[0]
    session.layers()  # recorded once; each decompx run gets fresh views of these records

    def run_decompx():
        views = session.layers()
        for v in views:
            v.clear()
        inputs = Inputs(request=session.request, layer_views=lambda: views, arrays={})
        decompx.compute(inputs, ["decompx"], {})

    d, d_ff = session.request.d_model, session.request.d_ff
    a = torch.randn(n * n, d, dtype=lm.dtype)
    w = torch.randn(d, d_ff, dtype=lm.dtype)
    _, med = alternate(
        {"forward": lambda: record(lm, ids, mask), "decompx": run_decompx, "gemm": lambda: a @ w}, repeat
    )
    flops = decompx.flops(session.request)
    return {
        "n": len(enc.ids),
        "forward_s": med["forward"],
        "decompx_s": med["decompx"],
        "ratio": med["decompx"] / med["forward"],
        "flops": flops,
        "rate": flops / med["decompx"],
        "gemm_rate": 2.0 * n * n * d * d_ff / med["gemm"],
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="minilm")
    ap.add_argument("--tokens", type=int, nargs="+", default=[32, 128])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    lm = normviz.load(args.model, dtype=args.dtype)
    print(
        f"{args.model} ({args.dtype}), torch {torch.__version__}, {platform.machine()}, "
        f"{torch.get_num_threads()} threads; budget rate assumed {cost.RATES['decompx']['cpu']:.0e} FLOP/s"
    )
    print(
        "| n | forward (s) | decompx (s) | decompx / forward | FLOPs (estimate) | achieved FLOP/s | one "
        "[n²,d]@[d,d_ff] GEMM, FLOP/s |"
    )
    print("|---|---|---|---|---|---|---|")
    for n in args.tokens:
        r = measure(lm, n, args.repeat)
        print(
            f"| {r['n']} | {r['forward_s']:.4f} | {r['decompx_s']:.3f} | {r['ratio']:.0f}× | {r['flops']:.2e} "
            f"| {r['rate']:.2e} | {r['gemm_rate']:.2e} |"
        )


if __name__ == "__main__":
    main()
