"""Where a continuation's explanation spends its time (issue 39's browser bar: a 20-token continuation of a
12-token prompt on smollm2 drawn ≤ 3 s after the click), in wall AND CPU seconds per phase.

    python benchmarks/bench_continuation_phases.py [--repeat 3] [--steps 20] [--out results.json]

A fresh Session + ``explain_continuation(T)`` per repeat, its phases timed by wrapping the functions it calls:
``generate`` (:func:`normviz.attribution.continuation.greedy`: transformers' ``generate`` with the KV cache),
``record`` (the recording pass over prompt + continuation, at the first ``layers()``), ``targets`` (the readout at
the T rows), ``direct`` (heads / FF direct parts), ``backward`` (the ONE batched adjoint pass for the T targets;
``ff_factors`` inside it). Beside them, the units: one plain forward pass over the whole sequence and T + 1
one-token forward passes (what a greedy decode must at least run: each reads every weight once).

CPU seconds (all of the process's threads) are the figure on a shared machine: the wall clock follows the load
(at load 10-15 on 2 cores every phase's wall time is 3-6 × its CPU time), the CPU time much less so. At such
a load torch's two intra-op threads also spin-wait for each other (a 3-token forward: 1.5 CPU s on 2 threads at
load 15, 0.06 s on one), so ``--threads 1`` gives the work's own CPU time there.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
TEXT = "Yesterday the old fisherman walked slowly down to the harbour at"  # 12 smollm2 tokens (the browser test's)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--threads", type=int, default=0, help="torch's intra-op threads (0: torch's default)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(HERE, ".."))
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    import normviz
    from normviz.attribution import adjoint
    from normviz.attribution import continuation as C
    from normviz.session.session import Session

    spent: dict = defaultdict(float)

    def timed(owner, name, key):
        f = getattr(owner, name)

        def run(*a, **k):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return f(*a, **k)
            finally:
                spent[key + " wall"] += time.perf_counter() - t0
                spent[key + " cpu"] += time.process_time() - c0

        setattr(owner, name, run)

    for owner, name, key in (
        (C, "greedy", "generate"),
        (Session, "layers", "record"),
        (C, "_targets", "targets"),
        (C, "_direct", "direct"),
        (C, "stack_backward", "backward"),
        (adjoint.Frozen, "factors", "backward: ff_factors"),
    ):
        timed(owner, name, key)
    lm = normviz.load("smollm2", device="cpu")
    m = lm.head_model
    runs = []
    for r in range(args.repeat + 1):  # the first: first-call costs, not kept
        spent.clear()
        s = normviz.Session(lm, TEXT)
        t0, c0 = time.perf_counter(), time.process_time()
        c = s.explain_continuation(args.steps)
        spent["total wall"], spent["total cpu"] = time.perf_counter() - t0, time.process_time() - c0
        ids = torch.tensor([list(s.encoded.ids) + c.generated_ids.tolist()])
        with torch.no_grad():
            t0, c0 = time.perf_counter(), time.process_time()
            m(input_ids=ids, use_cache=False)
            spent["unit: forward over prompt + continuation wall"] = time.perf_counter() - t0
            spent["unit: forward over prompt + continuation cpu"] = time.process_time() - c0
            t0, c0 = time.perf_counter(), time.process_time()
            for k in range(len(c) + 1):
                m(input_ids=ids[:, k : k + 1], use_cache=False, logits_to_keep=1)
            spent["unit: T + 1 one-token forwards wall"] = time.perf_counter() - t0
            spent["unit: T + 1 one-token forwards cpu"] = time.process_time() - c0
        row = {k: round(v, 3) for k, v in sorted(spent.items())}
        row["load"] = os.getloadavg()[0]
        print(json.dumps(row), flush=True)
        if r:
            runs.append(row)
    out = {
        "model": "smollm2",
        "prompt_tokens": s.n_tokens,
        "steps": len(c),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "runs": runs,
    }
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
