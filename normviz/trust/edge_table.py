"""The known-circuit table's edge part (``normviz faithfulness --circuits --edges``): per benchmark, each edge
method's faithfulness-curve area with its 95 % bootstrap interval (:func:`.edge_curves.evaluate_edges`: keep the
top-k edges, mean-ablate the rest), or the reason its edges are not scored — never a blank.

    score(bench, resamples)   evaluate_edges' dict, or {"benchmark": …, "not_scored": why} for a model the edge
                              pass cannot split (not a Llama-style decoder, no LM head)
    rows(results)             flat rows (COLUMNS) for the csv; a benchmark not scored is one row saying why
    markdown(results), html(results)
"""

from __future__ import annotations

import math

from .edge_curves import evaluate_edges, not_scorable

COLUMNS = ("benchmark", "method", "area", "area_lo", "area_hi", "edge_auroc", "seconds", "edges", "not_scored")


def score(bench, resamples: int = 1000) -> dict:
    why = not_scorable(bench.lm)
    if why is not None:
        return {"benchmark": bench.name, "not_scored": why}
    return evaluate_edges(bench, resamples=resamples)


def rows(results: list[dict]) -> list[dict]:
    out = []
    for res in results:
        if "not_scored" in res:
            out.append({c: "" for c in COLUMNS} | {"benchmark": res["benchmark"], "not_scored": res["not_scored"]})
            continue
        for r in res["methods"]:
            out.append(
                {
                    "benchmark": res["benchmark"],
                    **{c: r[c] for c in ("method", "area", "area_lo", "area_hi", "seconds")},
                    "edge_auroc": r.get("edge_auroc", ""),
                    "edges": res["edges"],
                    "not_scored": "",
                }
            )
    return out


def _ci(v, lo, hi) -> str:
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]" if math.isfinite(lo) else f"{v:.3f}"


def _cells(row: dict) -> list[str]:
    if row["not_scored"]:
        return [row["benchmark"], "—", f"not scored: {row['not_scored']}", "—", "—", "—"]
    auc = row["edge_auroc"]
    return [
        row["benchmark"],
        row["method"],
        _ci(row["area"], row["area_lo"], row["area_hi"]),
        f"{auc:.3f}" if auc != "" else "— (no edge truth)",
        f"{row['seconds']:.4f}",
        str(row["edges"]),
    ]


HEADER = ("benchmark", "edge method", "edge curve area [95 % CI]", "edge AUROC (head → head)", "s / example", "edges")


def markdown(results: list[dict]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|---|---|---|---:|---:|---:|"]
    lines += ["| " + " | ".join(_cells(r)) + " |" for r in rows(results)]
    return "\n".join(lines) + "\n"


def html(results: list[dict]) -> str:
    from html import escape

    head = "".join(f"<th>{escape(c)}</th>" for c in HEADER)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in _cells(r)) + "</tr>" for r in rows(results))
    return f"<h2>Edge faithfulness curves</h2><table><tr>{head}</tr>{body}</table>"
