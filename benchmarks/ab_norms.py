"""The norm family of two code versions alternated in one process, against the forward pass (issue 24).

    git archive <commit> normviz | tar -x -C /tmp/old      # the old version's package
    python benchmarks/ab_norms.py --old /tmp/old/normviz [--threads 1] [--repeats 15] 32 128 256 512

The old package is copied under the name ``normviz_old`` into a temporary directory and imported beside this
checkout's ``normviz``; per n (minilm-sized random BERT, as ``bench_norms.py``), the forward pass with
attentions, the old and the new ``Session.from_encoded(…).get(attention, norm, norm_layer, attn_res,
attn_res_ln)`` run in turn ``--repeats`` times. Printed: the medians of CPU seconds (``process_time``; at one
thread the work, which a loaded machine inflates far less than wall time) and of wall time, each as a ratio to
the forward pass, and whether both versions gave the same bits. The copy is kept (in the temporary directory's
``normviz_ab/``) with numba's cache of its kernels (the first run compiles them). The copy's compiled kernels
can round differently (float32, ~1e-7) from the checkout's even where the source is the same; exactness across
versions is ``check_norms_equivalence.py``'s job, the bits printed here are only a hint.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("n", type=int, nargs="+")
    ap.add_argument("--old", required=True, help="the old version's normviz package directory")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    # a fixed place per old package, kept: numba's on-disk cache of its kernels lives beside them, and kernels
    # compiled afresh in this process can round differently from cached ones (float32 ~1e-7)
    tmp = os.path.join(
        tempfile.gettempdir(), "normviz_ab", hashlib.sha1(os.path.abspath(args.old).encode()).hexdigest()[:12]
    )
    if not os.path.isdir(os.path.join(tmp, "normviz_old")):
        shutil.copytree(args.old, os.path.join(tmp, "normviz_old"), ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, tmp)
    import bench_norms as bn
    import normviz_old
    import numba
    import numpy as np
    import torch
    from normviz_old.tokens import Encoded as OldEncoded

    import normviz

    torch.set_num_threads(args.threads)
    numba.set_num_threads(args.threads)
    torch.set_grad_enabled(False)
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]), "threads", args.threads, flush=True)
    for n in args.n:
        model, lm, ids, enc = bn.build("minilm", n)
        lm_old = normviz_old.from_model(model, None, name="old")
        enc_old = OldEncoded(ids=enc.ids, tokens=enc.tokens, labels=enc.labels, special=enc.special, dropped=0)
        runs = {
            "forward": lambda: model(input_ids=ids, output_attentions=True),
            "old": lambda: normviz_old.Session.from_encoded(lm_old, [enc_old])[0].get(bn.KEYS),
            "new": lambda: normviz.Session.from_encoded(lm, [enc])[0].get(bn.KEYS),
        }
        for run in runs.values():  # warm-up (kernels from numba's cache, first large arrays)
            run()
            run()
        a, b = runs["new"](), runs["old"]()
        same = all(np.array_equal(a.arrays[k], b.arrays[k]) for k in bn.KEYS)
        if not same:
            print(
                "  differ:",
                {
                    k: float(np.abs(a.arrays[k] - b.arrays[k]).max() / np.abs(b.arrays[k]).max())
                    for k in bn.KEYS
                    if not np.array_equal(a.arrays[k], b.arrays[k])
                },
            )
        cpu: dict[str, list] = {c: [] for c in runs}
        wall: dict[str, list] = {c: [] for c in runs}
        for _ in range(args.repeats):
            for c, run in runs.items():
                c0, t0 = time.process_time(), time.perf_counter()
                run()
                t1, c1 = time.perf_counter(), time.process_time()
                cpu[c].append(c1 - c0)
                wall[c].append(t1 - t0)
        mc = {c: statistics.median(v) for c, v in cpu.items()}
        mw = {c: statistics.median(v) for c, v in wall.items()}
        print(
            f"n={n} same bits {same}; forward cpu {mc['forward'] * 1e3:.1f} ms, wall {mw['forward'] * 1e3:.1f} ms; "
            + "; ".join(
                f"{c}: cpu {mc[c] / mc['forward']:.3f}x, wall {mw[c] / mw['forward']:.3f}x" for c in ("old", "new")
            ),
            flush=True,
        )
    print("load", " ".join(open("/proc/loadavg").read().split()[:3]))


if __name__ == "__main__":
    main()
