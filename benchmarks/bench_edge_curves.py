"""Edge faithfulness curves (issue 41, MIB's CPR on edges): keep the top-k edges of EAP, EAP-IG and the exact
attribution graph (normviz's edges), mean-ablate the rest, the share of the logit difference recovered against k and
its area, with 95 % bootstrap intervals over examples; on a shipped benchmark with a known circuit and on an
embedded model's proxy prompts (normviz.trust.circuit_scores.PROMPTS). One run; seconds are the shared machine's.

    PYTHONPATH=. python benchmarks/bench_edge_curves.py [planted_induction] [--model smollm2] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from normviz import circuits
from normviz.trust import circuit_scores as cs
from normviz.trust.edge_curves import evaluate_edges


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("benchmarks", nargs="*", default=["planted_induction"])
    p.add_argument("--model", action="append", default=[], help="an embedded model scored on the proxy prompts")
    p.add_argument("--resamples", type=int, default=1000)
    p.add_argument("--out", default=str(Path(__file__).parent / "results" / "edge_curves.json"))
    a = p.parse_args()
    torch.set_num_threads(2)
    results = []
    for name in a.benchmarks + a.model:
        t0 = time.time()
        if name in a.model:
            import normviz

            bench = cs.proxy_benchmark(normviz.load(name, device="cpu"), name=name)
        else:
            bench = circuits.load(name)
        got = evaluate_edges(bench, resamples=a.resamples)
        got["wall_s"] = round(time.time() - t0, 1)
        results.append(got)
        print(f"\n{name}: {got['edges']} edges, {got['examples']} examples, {got['wall_s']} s")
        print("| method | curve area [95 % CI] | edge AUROC | s / example |\n|---|---|---:|---:|")
        for r in got["methods"]:
            auc = f"{r['edge_auroc']:.3f}" if "edge_auroc" in r else "—"
            print(
                f"| {r['method']} | {r['area']:.3f} [{r['area_lo']:.3f}, {r['area_hi']:.3f}] | {auc} | "
                f"{r['seconds']:.4f} |",
                flush=True,
            )
    Path(a.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
