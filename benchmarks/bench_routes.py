"""Information-flow routes' time against the model's own forward pass and against the cost check's
estimate, in one run (issues 21, 29).

    python benchmarks/bench_routes.py [--model smollm2] [--tokens 16 64 256] [--repeat 3] [--threshold 0.04]
    python benchmarks/bench_routes.py --estimate [--tokens 32 64 128] [--thresholds 0.01 0.04 0.2]

For each length n, alternated in one process (:func:`benchmarks.timing.alternate`), medians:
  forward     the recording pass (:func:`normviz.record.recorder.record`, what a Session runs once)
  routes      ``normviz.routes(session, threshold=τ)`` on the recorded session (rows reached from the last token)
  routes_all  the same at τ = 0 (every row of every layer reached: the worst case)
Prints seconds, ratios to the forward pass, the edges kept and the load average. ``--estimate``: per n and τ,
the measured seconds, the rows scored (a-nodes) and the edges kept, against :func:`flow.cost` (the estimate the
check refuses by, with its bound on the rows) and round 4's FLOP count at 4e10/s; the implied rate (numbers
scored per second, measured rows) is what ``flow.ROUTES_NUMBERS_PER_SECOND`` is set from.
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
from normviz.attribution import flow  # noqa: E402
from normviz.core.tokens import pad_batch  # noqa: E402
from normviz.record.recorder import record  # noqa: E402
from normviz.session.session import Session  # noqa: E402


def measure(lm, n: int, repeat: int, tau: float) -> dict:
    enc = encode_exactly(lm, n)
    ids, mask = pad_batch([enc])
    session = Session.from_encoded(lm, [enc])[0]
    session.layers()
    kept = {}

    def routes(t):
        def run():
            kept[t] = len(normviz.routes(session, threshold=t).edges)

        return run

    steps = {"forward": lambda: record(lm, ids, mask), "routes": routes(tau), "routes_all": routes(0.0)}
    _, med = alternate(steps, repeat)
    return {
        "n": len(enc.ids),
        **{f"{k}_s": v for k, v in med.items()},
        "edges": kept[tau],
        "edges_all": kept[0.0],
        "estimate": flow.cost(session.request, {}, tau),
    }


def estimate(lm, n: int, taus, repeat: int) -> None:
    import time

    enc = encode_exactly(lm, n)
    session = Session.from_encoded(lm, [enc])[0]
    session.layers()
    req = session.request
    H, d, L = req.n_heads, req.d_model, req.n_layers
    for tau in taus:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            r = normviz.routes(session, threshold=tau)
            times.append(time.perf_counter() - t0)
        t = sorted(times)[len(times) // 2]
        rows = sum(1 for nd in r.nodes if nd["kind"] == "a")
        numbers = rows * (H * req.n_tokens + 2) * d
        old = 3.0 * L * req.n_tokens * (H * req.n_tokens + 4) * d / 4e10
        print(
            f"| {req.n_tokens} | {tau:g} | {t:.2f} | {rows} (est. {flow.rows_reached(req.n_tokens, L, tau):.0f})"
            f" | {len(r.edges)} | {flow.cost(req, {}, tau):.2f} | {old:.3f} | {numbers / t:.2e} |",
            flush=True,
        )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--tokens", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threshold", type=float, default=0.04)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--estimate", action="store_true", help="measured time against the cost check's estimate")
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.01, 0.04, 0.2])
    args = ap.parse_args(argv)
    lm = normviz.load(args.model, dtype=args.dtype)
    print(
        f"{args.model} ({args.dtype}), torch {torch.__version__}, {platform.machine()}, "
        f"{torch.get_num_threads()} threads, load average {os.getloadavg()[0]:.1f}"
    )
    if args.estimate:
        print("| n | τ | measured (s) | rows scored | edges | estimate (s) | FLOP estimate, round 4 (s) | numbers/s |")
        print("|---|---|---|---|---|---|---|---|")
        for n in args.tokens:
            estimate(lm, n, args.thresholds, args.repeat)
        print(f"load average after: {os.getloadavg()[0]:.1f}")
        return
    print(
        f"| n | forward (s) | routes τ={args.threshold:g} / fwd (edges) | routes τ=0 / fwd (edges) | estimate τ (s) |"
    )
    print("|---|---|---|---|---|")
    for n in args.tokens:
        r = measure(lm, n, args.repeat, args.threshold)
        f = r["forward_s"]
        print(
            f"| {r['n']} | {f:.3f} | {r['routes_s'] / f:.2f}× ({r['edges']}) | {r['routes_all_s'] / f:.2f}× "
            f"({r['edges_all']}) | {r['estimate']:.2f} |",
            flush=True,
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
