"""``normviz faithfulness --circuits [NAME …] --out DIR``: every method's head ranking scored against the known
circuits of normviz.circuits (AUROC, faithfulness-curve areas with bootstrap intervals, cost beside head
ablation). Writes ``DIR/circuits.csv``, ``DIR/circuits.md``, ``DIR/circuits.html`` and ``DIR/circuits.json`` (what the
app's Known circuits view reads when shipped as ``assets/circuits/scores.json``)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from ..core.errors import NormvizError

PROXY_MODELS = ("smollm2", "gemma3")  # embedded models with no known circuit: a proxy truth (circuit_scores)
# AtP* is left out there: its QK fix costs L·H dual passes (79 s an example on smollm2, 2.5× head ablation)
PROXY_METHODS = ("direct", "graph", "atp", "eap-ig", "cp-lrp", "attn-lrp", "ablation", "attention")


def run_circuits(args) -> int:
    from .. import circuits
    from ..trust import circuit_scores as cs

    names = list(args.circuits) or circuits.names()
    unknown = [n for n in names if n not in circuits.names() and n not in PROXY_MODELS]
    if unknown or not names:
        raise NormvizError(
            f"unknown circuit benchmark(s) {', '.join(map(repr, unknown)) or '(none shipped)'}; "
            f"shipped: {', '.join(circuits.names()) or 'none'}; embedded models scored against "
            f"a proxy (no known circuit): {', '.join(PROXY_MODELS)}."
        )
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NormvizError(f"Could not create {str(out)!r}: {exc.strerror or exc}.") from None
    start, results = time.perf_counter(), []
    for name in names:
        print(f"{name} …", file=sys.stderr, flush=True)
        if name in PROXY_MODELS:  # no known circuit: scored against head ablation's top heads (said in the table)
            from .. import load

            bench = cs.proxy_benchmark(load(name, device="cpu"))
            results.append(cs.evaluate(bench, methods=PROXY_METHODS, resamples=args.resamples))
        else:
            results.append(cs.evaluate(circuits.load(name), resamples=args.resamples))
    wall = time.perf_counter() - start
    cs.to_csv(results, out / "circuits.csv")
    (out / "circuits.md").write_text(
        "# Which method finds the known circuit\n\n"
        + cs.markdown(results)
        + f"\nAUROC of each method's head ranking (mean |score| over examples) against the circuit; curve area: "
        f"the share of the logit difference recovered keeping the top-k heads and mean-ablating the rest, "
        f"averaged over k; 95 % bootstrap intervals over examples ({args.resamples} resamples); seconds per "
        f"example and their ratio to head ablation's. {wall:.0f} s wall.\n",
        encoding="utf-8",
    )
    (out / "circuits.html").write_text(cs.html(results), encoding="utf-8")
    (out / "circuits.json").write_text(cs.to_json(results), encoding="utf-8")
    print(f"wrote {out}: {len(results)} benchmarks, {wall:.0f} s", file=sys.stderr)
    return 0
