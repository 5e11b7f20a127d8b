"""Peak memory that ``Session.attend`` adds (issue 42: +2.2 GB at 1,024 tokens on smollm2), with its batched
layer calls kept near ``qk.CHUNK_BYTES`` (now) and with 64 component rows per call whatever the length (before),
each in a fresh process; beside it ``qk.attend_bytes``'s estimate.

    python benchmarks/bench_attend_memory.py [N_TOKENS] [LAYER]
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys


def child(n: int, layer: int, old: bool) -> dict:
    import time

    import normviz
    from normviz.attribution import qk

    if old:
        qk.CHUNK_BYTES = 1 << 60  # 64 rows per call, as before
    lm = normviz.load("smollm2", device="cpu")
    words = ("the river rose in the night and the town woke to water in the streets " * 200).split()
    s = normviz.Session(lm, " ".join(words), max_tokens=n)
    s.layers()
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    a = s.attend(layer, 0, query=-1, key=0)
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    d = lm.sizes[0]
    return {
        "n": s.n_tokens,
        "old": old,
        "added_gb": (peak - base) / 2**30,
        "wall_s": wall,
        "total": a.total,
        "estimate_gb": qk.attend_bytes(s.n_tokens, d, lm.n_heads, layer, False, 4) / 2**30,
        "rows": qk.chunk_rows(s.n_tokens, d, 4) if not old else qk.CHUNK_ROWS,
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        print(json.dumps(child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "old")))
        sys.exit(0)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    layer = int(sys.argv[2]) if len(sys.argv) > 2 else 29
    for kind in ("old", "new"):
        out = (
            subprocess.run(
                [sys.executable, __file__, "--child", str(n), str(layer), kind],
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        print(out, flush=True)
