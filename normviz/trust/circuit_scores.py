"""Which attribution finds the circuit the model really uses? Scores on benchmarks whose circuit is known
(:mod:`normviz.circuits`).

    head_scores(bench, methods)     per method: [E, L, H] head scores over the benchmark's examples and seconds
    auroc(scores, truth)            the area under the ROC of a head ranking against the circuit (ties averaged)
    curve(bench, ranking, means)    MIB-style faithfulness: keep the top-k heads, mean-ablate the rest, the
                                    share of the logit difference recovered, k = 0 … L·H ([E, K + 1] scores)
    evaluate(bench, methods)        a :class:`CircuitScores`: per method AUROC and curve area with 95 % bootstrap
                                    intervals over examples, and its cost beside head ablation's

The methods, each a head ranking by |score| (a head matters whichever way it pushes):

    direct      explain()'s exact direct head parts, summed over source tokens (the head's write read by the
                logit through the final norm at its real scale)
    graph       the exact attribution graph's node values: the head's total effect through the frozen network
                (all paths; :mod:`normviz.attribution.graph`). sources_by_layer is the same adjoint per token; its
                per-head form is this node value
    atp         attribution patching, the first-order estimate of zero ablation (:mod:`normviz.attribution.atp`)
    atp*        AtP with the QK fix (later heads' softmax recomputed)
    eap-ig      EAP-IG's head scores: integrated gradients from every head zero-ablated to none (16 midpoint
                steps; its completeness gap is kept in ``CircuitScores.eap_gap``)
    ablation    zero ablation of each head, one copy per head (the intervention the estimates approximate)
    cp-lrp      CP-LRP: gradient × input on each head's output with every norm's scale and attention pattern
                frozen (:mod:`normviz.attribution.lrp`; the LRP family's "LN linear" and "attention constant" rules)
    attn-lrp    AttnLRP (Achtibat et al. 2024): the same relevance on each head's output with relevance also sent
                through the softmax (its linearisation), halved at q·kᵀ, A·V and gate ⊙ up, the identity rule on
                activations (:mod:`normviz.attribution.attn_lrp`)
    attention   baseline: the prediction row's largest attention weight outside the first token

Edge methods, scored where the benchmark's truth has edges (head → later head), each an edge ranking by |score|
(:mod:`normviz.attribution.eap`): ``eap`` (edge attribution patching, zero ablation) and ``eap-ig`` (its
integrated form from every head ablated to none, 16 midpoint steps). Their AUROC (with intervals) is in
``CircuitScores.edge_rows``; edge faithfulness curves (keep the top-k edges) are not computed.

A model without a known circuit (smollm2, gemma3 …: :func:`proxy_benchmark`) is scored the same way against a
**proxy**: the heads whose zero ablation moves the mean logit difference most. That AUROC asks "does the method
rank the heads that matter most for ablation first", not "does it find the circuit" — said in its description.

The recovered share at k is (F_k − F_0) / (F_all − F_0) with F the mean logit difference over examples, F_0 with
every head mean-ablated, F_all unchanged (MIB's CPR, Mueller et al. 2025, on heads); the area is its mean over
k / (L·H) by the trapezoid rule. A ranking is fixed from all examples; the bootstrap resamples examples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ..attribution.knockout import head_means_of
from ..circuits import Benchmark, ablated, encoded

METHODS = ("direct", "graph", "atp", "atp*", "eap-ig", "cp-lrp", "attn-lrp", "ablation", "attention")
EDGE_METHODS = ("eap", "eap-ig")
CURVE_POINTS = 33  # faithfulness-curve points when a model has more heads than this (k spaced evenly)
EAP_STEPS = 16
RESAMPLES = 1000


def _session(lm, ids):
    from ..session.session import Session

    return Session.from_encoded(lm, [encoded(lm, ids)])[0]


def _attention(lm, ids) -> np.ndarray:
    with torch.no_grad():
        out = lm.model(input_ids=torch.tensor([ids], device=lm.device), output_attentions=True)
    att = torch.stack(out.attentions, 0)[:, 0, :, -1, 1:]  # [L, H, n − 1]: the prediction row, first token left out
    return att.max(-1).values.to(torch.float64).cpu().numpy() if att.shape[-1] else np.zeros(att.shape[:2])


def _one(method: str, s, lm, ids, token, foil, gaps: list) -> np.ndarray:
    if method == "eap-ig":
        e = s.eap_ig(token, foil, steps=EAP_STEPS)
        gaps.append((e.gap, e.total - e.ablated))
        return e.delta
    if method == "direct":
        return np.asarray(s.explain(token, foil).heads).sum(-1)
    if method == "graph":
        from ..attribution.graph import graph

        g = graph(s, token, foil)
        out = np.zeros((lm.n_layers, lm.n_heads))
        for k, kind in enumerate(g.kinds):
            if kind == "attention head":
                out[g.layers[k], g.heads[k]] = g.values[k]
        return out
    if method in ("atp", "atp*"):
        return s.atp(token, foil, qk_fix=method == "atp*").delta
    if method == "ablation":
        return s.ablate_heads(token, foil).delta
    if method == "cp-lrp":
        from ..attribution.lrp import cp_lrp

        return cp_lrp(s, token, foil).heads
    if method == "attn-lrp":
        from ..attribution.attn_lrp import attn_lrp

        return attn_lrp(s, token, foil).heads
    if method == "attention":
        return _attention(lm, ids)
    raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")


def edge_scores(bench: Benchmark, methods=EDGE_METHODS) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """({method: [E, L, H, L, H]} head-to-head edge scores (nan where no edge), {method: seconds per example})."""
    from ..attribution.eap import edges

    lm = bench.lm
    scores: dict[str, list] = {m: [] for m in methods}
    seconds = {m: 0.0 for m in methods}
    for ids, token, foil in bench.examples:
        s = _session(lm, ids)
        for m in methods:
            t0 = time.perf_counter()
            scores[m].append(edges(s, token, foil, steps=EAP_STEPS if m == "eap-ig" else None).heads)
            seconds[m] += time.perf_counter() - t0
    E = max(1, len(bench.examples))
    return {m: np.stack(v) for m, v in scores.items()}, {m: t / E for m, t in seconds.items()}


def edge_truth(bench: Benchmark) -> np.ndarray:
    """[L, H, L, H] booleans: the benchmark's edges (head → later head)."""
    L, H = bench.lm.n_layers, bench.lm.n_heads
    out = np.zeros((L, H, L, H), dtype=bool)
    for (a, b), (c, d) in bench.edges or ():
        out[a, b, c, d] = True
    return out


def edge_auroc(scores: np.ndarray, truth: np.ndarray) -> float:
    """AUROC of an [L, H, L, H] edge score (|score|) over the edges that exist (finite scores)."""
    ok = np.isfinite(scores)
    return auroc(np.abs(scores[ok]), truth[ok])


def head_scores(
    bench: Benchmark, methods=METHODS, gaps: list | None = None
) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """({method: [E, L, H]}, {method: seconds per example}); the recording pass (shared) is added to each
    method that reads it (direct, graph) — every method's time includes what it needs. ``gaps``: a list that
    receives EAP-IG's (completeness gap, total − all ablated) per example."""
    gaps = [] if gaps is None else gaps
    lm = bench.lm
    scores = {m: [] for m in methods}
    seconds = {m: 0.0 for m in methods}
    for ids, token, foil in bench.examples:
        t0 = time.perf_counter()
        s = _session(lm, ids)
        s.layers()
        record = time.perf_counter() - t0
        for m in methods:
            t0 = time.perf_counter()
            scores[m].append(np.asarray(_one(m, s, lm, ids, token, foil, gaps), dtype=np.float64))
            seconds[m] += time.perf_counter() - t0 + (record if m in ("direct", "graph") else 0.0)
    E = max(1, len(bench.examples))
    return {m: np.stack(v) for m, v in scores.items()}, {m: t / E for m, t in seconds.items()}


def auroc(scores, truth) -> float:
    """P(a circuit head scores above a head outside it), ties counted half (the Mann–Whitney form)."""
    from scipy.stats import rankdata

    s, t = np.asarray(scores, dtype=np.float64).ravel(), np.asarray(truth, dtype=bool).ravel()
    pos, neg = int(t.sum()), int((~t).sum())
    if not pos or not neg:
        return float("nan")
    r = rankdata(s)
    return float((r[t].sum() - pos * (pos + 1) / 2) / (pos * neg))


def ranking(scores: np.ndarray) -> list[tuple[int, int]]:
    """Heads by mean |score| over examples, highest first (ties: lower layer, then head, first)."""
    mean = np.abs(scores).mean(0)
    order = sorted(np.ndindex(*mean.shape), key=lambda x: (-mean[x], x))
    return [(int(l), int(h)) for l, h in order]


def curve_ks(K: int, points: int = CURVE_POINTS) -> list[int]:
    """The k at which the curve is measured: every k = 0 … K, or ``points`` evenly spaced ones when K is larger."""
    if K + 1 <= points:
        return list(range(K + 1))
    return sorted({int(round(x)) for x in np.linspace(0, K, points)})


def curve(bench: Benchmark, order: list[tuple[int, int]], means, ks: list[int] | None = None) -> np.ndarray:
    """[E, len(ks)] logit differences with the top k heads of ``order`` kept and the rest mean-ablated, for each k
    of ``ks`` (default every k = 0 … K; k = K: nothing ablated)."""
    K = len(order)
    ks = list(range(K + 1)) if ks is None else list(ks)
    sets = [order[k:] for k in ks if k < K]  # keep the first k, ablate the rest
    got = ablated(bench.lm, bench.examples, sets, means)  # [E, 1 + S]: unchanged, then each k < K
    cols, j = [], 1
    for k in ks:
        if k < K:
            cols.append(got[:, j])
            j += 1
        else:
            cols.append(got[:, 0])
    return np.stack(cols, 1)


def recovered(f: np.ndarray) -> np.ndarray:
    """[K + 1] share of the mean logit difference recovered from the [E, K + 1] curve scores."""
    m = f.mean(0)
    return (m - m[0]) / (m[-1] - m[0])


def area(share: np.ndarray, x=None) -> float:
    """The trapezoid area under the recovered share over x = k / K (default: evenly spaced)."""
    x = np.linspace(0.0, 1.0, share.size) if x is None else np.asarray(x, dtype=np.float64)
    return float(((share[1:] + share[:-1]) / 2 * np.diff(x)).sum())


def _interval(values) -> tuple[float, float]:
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not v.size:
        return float("nan"), float("nan")
    lo, hi = np.quantile(v, [0.025, 0.975])
    return float(lo), float(hi)


@dataclass
class MethodRow:
    benchmark: str
    method: str
    auroc: float
    auroc_lo: float
    auroc_hi: float
    area: float
    area_lo: float
    area_hi: float
    seconds: float  # per example
    cost_vs_ablation: float  # seconds / head ablation's seconds
    share: list[float] = field(default_factory=list)  # the recovered share at k = 0 … K
    top: list[tuple[int, int]] = field(default_factory=list)  # the ranking, best first


@dataclass
class EdgeRow:
    benchmark: str
    method: str
    auroc: float
    auroc_lo: float
    auroc_hi: float
    seconds: float
    cost_vs_ablation: float
    top: list = field(default_factory=list)  # the 10 best edges: [[l, h], [l', h'], mean |score|]


@dataclass
class CircuitScores:
    benchmark: str
    description: str
    circuit: list[tuple[int, int]]
    rows: list[MethodRow]
    total: float  # mean logit difference, unchanged
    ablated_all: float  # with every head mean-ablated
    examples: int
    scores: dict[str, np.ndarray]  # [E, L, H] per method
    eap_gap: np.ndarray | None = None  # [E, 2]: EAP-IG's completeness gap and total − all ablated, per example
    edge_rows: list[EdgeRow] = field(default_factory=list)  # where the truth has edges
    proxy: bool = False  # no known circuit: the truth is the heads ablation ranks first
    ks: list[int] = field(default_factory=list)  # the curve's k

    def row(self, method: str) -> MethodRow:
        return next(r for r in self.rows if r.method == method)


def evaluate(
    bench: Benchmark, methods=METHODS, resamples: int = RESAMPLES, seed: int = 0, edge_methods=EDGE_METHODS
) -> CircuitScores:
    gaps: list = []
    scores, seconds = head_scores(bench, methods, gaps)
    ks = curve_ks(bench.lm.n_layers * bench.lm.n_heads)
    x = np.asarray(ks, dtype=np.float64) / max(ks)
    truth = bench.truth()
    means = head_means_of(bench.lm, [encoded(bench.lm, ids) for ids, _, _ in bench.examples])
    rng = np.random.default_rng(seed)
    E = len(bench.examples)
    draws = rng.integers(0, E, (resamples, E))
    rows, f_any = [], None
    base = seconds.get("ablation")
    for m in methods:
        sc = scores[m]
        order = ranking(sc)
        f = curve(bench, order, means, ks)
        f_any = f
        share = recovered(f)
        boot_auc = [auroc(np.abs(sc[d]).mean(0), truth) for d in draws]
        boot_area = [area(recovered(f[d]), x) for d in draws]
        rows.append(
            MethodRow(
                benchmark=bench.name,
                method=m,
                auroc=auroc(np.abs(sc).mean(0), truth),
                **dict(zip(("auroc_lo", "auroc_hi"), _interval(boot_auc))),
                area=area(share, x),
                **dict(zip(("area_lo", "area_hi"), _interval(boot_area))),
                seconds=seconds[m],
                cost_vs_ablation=seconds[m] / base if base else float("nan"),
                share=share.tolist(),
                top=order,
            )
        )
    edge_rows = []
    if bench.edges and edge_methods:
        e_scores, e_seconds = edge_scores(bench, edge_methods)
        e_truth = edge_truth(bench)
        for m in edge_methods:
            sc = e_scores[m]
            mean = np.abs(sc).mean(0)
            boot = [edge_auroc(np.abs(sc[d]).mean(0), e_truth) for d in draws]
            best = sorted(((float(mean[i]), i) for i in np.ndindex(*mean.shape) if np.isfinite(mean[i])), reverse=True)[
                :10
            ]
            edge_rows.append(
                EdgeRow(
                    benchmark=bench.name,
                    method=m,
                    auroc=edge_auroc(mean, e_truth),
                    **dict(zip(("auroc_lo", "auroc_hi"), _interval(boot))),
                    seconds=e_seconds[m],
                    cost_vs_ablation=e_seconds[m] / base if base else float("nan"),
                    top=[[[int(i[0]), int(i[1])], [int(i[2]), int(i[3])], v] for v, i in best],
                )
            )
    total = float(f_any[:, -1].mean()) if f_any is not None else float("nan")
    return CircuitScores(
        benchmark=bench.name,
        description=bench.description,
        circuit=sorted(bench.circuit),
        rows=rows,
        total=total,
        ablated_all=float(f_any[:, 0].mean()) if f_any is not None else float("nan"),
        examples=E,
        scores=scores,
        eap_gap=np.array(gaps) if gaps else None,
        edge_rows=edge_rows,
        proxy=bool(bench.info.get("proxy")),
        ks=ks,
    )


# ---------------------------------------------------------------- models without a known circuit
PROMPTS = (
    ("The capital of France is", " Paris", " London"),
    ("The capital of Germany is", " Berlin", " Paris"),
    ("The capital of Italy is", " Rome", " Paris"),
    ("The capital of Spain is", " Madrid", " Rome"),
    ("The capital of Japan is", " Tokyo", " Beijing"),
    ("The capital of Russia is", " Moscow", " Berlin"),
)
PROXY_SHARE = 0.05  # the proxy "circuit": this share of the heads, by mean |zero-ablation effect|


def proxy_benchmark(
    lm, prompts=PROMPTS, share: float = PROXY_SHARE, name: str | None = None, examples: list | None = None
) -> Benchmark:
    """A :class:`Benchmark` on a model with **no known circuit**: the examples are ``prompts`` (text, token, foil;
    token and foil must be single tokens, others are left out) and the "circuit" is the top ``share`` of the
    heads by mean |zero-ablation effect| over them — an intervention proxy, said in ``.description``.
    ``examples`` [(ids, token, foil)]: given directly instead of ``prompts``."""
    from ..session.session import Session

    tok = lm.tokenizer
    given = examples is not None
    examples = list(examples) if given else []
    for text, token, foil in () if given else prompts:
        t, f = tok.encode(token, add_special_tokens=False), tok.encode(foil, add_special_tokens=False)
        if len(t) != 1 or len(f) != 1:
            continue
        ids = Session(lm, text).encoded.ids
        examples.append((list(ids), t[0], f[0]))
    if not examples:
        raise ValueError(f"no prompt's token and foil are single tokens of {lm.name}")
    ablation = np.stack([_session(lm, ids).ablate_heads(t, f).delta for ids, t, f in examples])
    mean = np.abs(ablation).mean(0)
    k = max(1, int(round(share * mean.size)))
    top = ranking(ablation)[:k]
    return Benchmark(
        name=name or lm.name,
        lm=lm,
        examples=examples,
        circuit=frozenset(top),
        edges=None,
        description=(
            f"{lm.name}: no known circuit. The truth scored against is a proxy: the {k} heads "
            f"({100 * share:.0f} %) whose zero ablation moves the logit difference most (mean |effect| over "
            f"{len(examples)} {'examples' if given else 'capital-city prompts, token − a foil city'}). Its AUROC "
            f"asks whether a method "
            "ranks the heads ablation ranks first, not whether it finds a circuit; head ablation scores "
            "1.0 against it by construction."
        ),
        info={"proxy": True, "ablation": ablation.tolist()},
    )


# ---------------------------------------------------------------- the table
COLUMNS = (
    "benchmark",
    "method",
    "auroc",
    "auroc_lo",
    "auroc_hi",
    "area",
    "area_lo",
    "area_hi",
    "seconds",
    "cost_vs_ablation",
)


def table_rows(results: list[CircuitScores]) -> list[dict]:
    return [{c: getattr(r, c) for c in COLUMNS} for res in results for r in res.rows]


def to_csv(results: list[CircuitScores], path) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for row in table_rows(results):
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})


def _ci(v, lo, hi) -> str:
    return f"{v:.3f} [{lo:.3f}, {hi:.3f}]" if np.isfinite(lo) else f"{v:.3f}"


def markdown(results: list[CircuitScores]) -> str:
    lines = [
        "| benchmark | method | AUROC [95 % CI] | curve area [95 % CI] | s / example | × head ablation |",
        "|---|---|---|---|---:|---:|",
    ]
    for res in results:
        for r in res.rows:
            lines.append(
                f"| {r.benchmark} | {r.method} | {_ci(r.auroc, r.auroc_lo, r.auroc_hi)} | "
                f"{_ci(r.area, r.area_lo, r.area_hi)} | {r.seconds:.4f} | {r.cost_vs_ablation:.2f} |"
            )
    edges = [r for res in results for r in res.edge_rows]
    if edges:
        lines += [
            "",
            "| benchmark | edge method | edge AUROC [95 % CI] | s / example | × head ablation |",
            "|---|---|---|---:|---:|",
        ]
        lines += [
            f"| {r.benchmark} | {r.method} edges | {_ci(r.auroc, r.auroc_lo, r.auroc_hi)} | {r.seconds:.4f} | "
            f"{r.cost_vs_ablation:.2f} |"
            for r in edges
        ]
    notes = [
        f"- **{res.benchmark}**: "
        + (f"NO KNOWN CIRCUIT — {res.description} Proxy heads: " if res.proxy else "circuit ")
        + f"{', '.join(f'L{l}.H{h}' for l, h in res.circuit)}; {res.examples} "
        f"examples; mean logit difference {res.total:.3f}, {res.ablated_all:.3f} with every head mean-ablated."
        + (
            ""
            if res.eap_gap is None
            else f" EAP-IG ({EAP_STEPS} steps) completeness gap: mean |gap| {np.abs(res.eap_gap[:, 0]).mean():.4f}, "
            f"{100 * np.abs(res.eap_gap[:, 0]).mean() / np.abs(res.eap_gap[:, 1]).mean():.2f} % of the mean "
            "|total − all heads zero-ablated|."
        )
        for res in results
    ]
    return "\n".join(lines + [""] + notes) + "\n"


def html(results: list[CircuitScores]) -> str:
    from html import escape

    head = "".join(
        f"<th>{escape(c)}</th>"
        for c in ("benchmark", "method", "AUROC [95 % CI]", "curve area [95 % CI]", "s / example", "× head ablation")
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{escape(str(x))}</td>"
            for x in (
                r.benchmark,
                r.method,
                _ci(r.auroc, r.auroc_lo, r.auroc_hi),
                _ci(r.area, r.area_lo, r.area_hi),
                f"{r.seconds:.4f}",
                f"{r.cost_vs_ablation:.2f}",
            )
        )
        + "</tr>"
        for res in results
        for r in res.rows
    )
    return (
        "<!doctype html><meta charset='utf-8'><title>normviz: known circuits</title>"
        "<style>body{font-family:sans-serif}td,th{padding:4px 10px;border-bottom:1px solid #ccc}</style>"
        f"<h1>Which method finds the known circuit</h1><table><tr>{head}</tr>{body}</table>"
    )


def to_json(results: list[CircuitScores]) -> str:
    """The results without the per-example arrays (what the app's Known circuits view reads): per benchmark its
    circuit, totals and per method the row, its ranking and its recovered shares; plus the mean |score| grid."""
    import json

    out = []
    for res in results:
        out.append(
            {
                "benchmark": res.benchmark,
                "description": res.description,
                "circuit": [list(x) for x in res.circuit],
                "total": res.total,
                "ablated_all": res.ablated_all,
                "examples": res.examples,
                "eap_gap": None if res.eap_gap is None else res.eap_gap.tolist(),
                "proxy": res.proxy,
                "ks": res.ks,
                "edge_methods": [
                    {
                        **{
                            c: getattr(r, c)
                            for c in ("method", "auroc", "auroc_lo", "auroc_hi", "seconds", "cost_vs_ablation")
                        },
                        "top": r.top,
                    }
                    for r in res.edge_rows
                ],
                "methods": [
                    {
                        **{c: getattr(r, c) for c in COLUMNS},
                        "share": r.share,
                        "top": [list(x) for x in r.top],
                        "grid": np.abs(res.scores[r.method]).mean(0).tolist(),
                    }
                    for r in res.rows
                ],
            }
        )
    return json.dumps(out, indent=1)


SHIPPED = Path(__file__).resolve().parents[2] / "assets" / "circuits" / "scores.json"


def shipped() -> list[dict]:
    """The shipped scores (``assets/circuits/scores.json``, written by ``normviz faithfulness --circuits``)."""
    import json

    return json.loads(SHIPPED.read_text(encoding="utf-8")) if SHIPPED.is_file() else []
