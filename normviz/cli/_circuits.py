"""``normviz faithfulness --circuits [NAME …] --out DIR``: every method's head ranking scored against the known
circuits of normviz.circuits (AUROC, faithfulness-curve areas with bootstrap intervals, cost beside head
ablation). Writes ``DIR/circuits.csv``, ``DIR/circuits.md``, ``DIR/circuits.html`` and ``DIR/circuits.json`` (what the
app's Known circuits view reads when shipped as ``assets/circuits/scores.json``). With ``--edges`` also the edge
faithfulness curves (:mod:`normviz.trust.edge_table`): ``DIR/circuits_edges.csv``, a second table in the md and
html, and each benchmark's ``edge_curves`` in the json (or ``not_scored``: why)."""

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
    start, results, edge_results = time.perf_counter(), [], []
    for name in names:
        print(f"{name} …", file=sys.stderr, flush=True)
        if name in PROXY_MODELS:  # no known circuit: scored against head ablation's top heads (said in the table)
            from .. import load

            bench = cs.proxy_benchmark(load(name, device="cpu"))
            results.append(cs.evaluate(bench, methods=PROXY_METHODS, resamples=args.resamples))
        else:
            bench = circuits.load(name)
            results.append(cs.evaluate(bench, resamples=args.resamples))
        if getattr(args, "edges", False):
            from ..trust import edge_table

            print(f"{name}: edge curves …", file=sys.stderr, flush=True)
            edge_results.append(edge_table.score(bench, resamples=args.resamples))
    wall = time.perf_counter() - start
    cs.to_csv(results, out / "circuits.csv")
    (out / "circuits.md").write_text(
        "# Which method finds the known circuit\n\n"
        + cs.markdown(results)
        + _edges_md(edge_results, getattr(args, "edges", False))
        + f"\nAUROC of each method's head ranking (mean |score| over examples) against the circuit; curve area: "
        f"the share of the logit difference recovered keeping the top-k heads and mean-ablating the rest, "
        f"averaged over k; 95 % bootstrap intervals over examples ({args.resamples} resamples); seconds per "
        f"example and their ratio to head ablation's. {wall:.0f} s wall.\n",
        encoding="utf-8",
    )
    (out / "circuits.html").write_text(cs.html(results) + _edges_html(edge_results), encoding="utf-8")
    (out / "circuits.json").write_text(_with_edges(cs.to_json(results), edge_results), encoding="utf-8")
    if edge_results:
        _edges_csv(edge_results, out / "circuits_edges.csv")
    print(f"wrote {out}: {len(results)} benchmarks, {wall:.0f} s", file=sys.stderr)
    return 0


def _edges_md(edge_results: list[dict], asked: bool) -> str:
    from ..trust import edge_table

    if not asked:
        return "\nEdge faithfulness curves: not computed (ask with --edges).\n"
    return (
        "\n## Edge faithfulness curves\n\n"
        + edge_table.markdown(edge_results)
        + "\nKeep a method's top-k edges (head → later head, FF block, logits; ranked by mean |score|), mean-ablate "
        "the rest in each receiver's own copy of the residual; the area under the share of the logit difference "
        "recovered against k / #edges, 95 % bootstrap over examples (normviz.trust.edge_curves).\n"
    )


def _edges_html(edge_results: list[dict]) -> str:
    from ..trust import edge_table

    return edge_table.html(edge_results) if edge_results else ""


def _with_edges(text: str, edge_results: list[dict]) -> str:
    import json

    if not edge_results:
        return text
    rows = json.loads(text)
    by_name = {e["benchmark"]: e for e in edge_results}
    for row in rows:
        row["edge_curves"] = by_name.get(row["benchmark"])
    return json.dumps(rows, indent=1)


def _edges_csv(edge_results: list[dict], path) -> None:
    import csv

    from ..trust import edge_table

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=edge_table.COLUMNS)
        w.writeheader()
        for row in edge_table.rows(edge_results):
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
