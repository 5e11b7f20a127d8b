"""Information-flow routes (Ferrando & Voita 2024, *Information Flow Routes*, §3) from normviz's own parts.

Every residual write of a pre-LN layer l is a sum of parts (:func:`normviz.attribution.layer_parts`):

    attention  a^l_i = x^l_i + Σ_h Σ_j α^{l,h}_ij f^{l,h}(x̂^l_j) + b^O        (the residual after attention)
    FF         x^{l+1}_i = a^l_i + FF_l(a^l_i)

with f^{l,h}(x̂) = (x̂ W^V_h + b^V_h) W^O_h (once per token, as in the norm maps). The importance of part z_k of
a sum y = Σ_k z_k is its L1 proximity to the sum, normalised over the parts (the paper's eq. for edge
importance):

    prox(z, y) = max(−‖z − y‖₁ + ‖y‖₁, 0),      importance(z_k) = prox(z_k, y) / Σ_m prox(z_m, y)

(0 when every proximity is 0). Edges: one per head h and source token j (x^l_j → a^l_i), one residual edge
x^l_i → a^l_i, and at the FF sum an FF edge and a residual edge a^l_i → x^{l+1}_i. b^O is one more part of the
attention sum (its share is reported on the a-node, it is no edge; a model without b^O has a zero part, whose
proximity is 0). The graph is extracted backwards from the prediction's node x^L_i: an edge is kept when its
importance exceeds τ and its target was reached. ``combine_heads=True`` sums the heads' importances per source
token first (LM-TT's ``build_full_graph`` without its ``renormalizing_threshold``); ``renormalise=True`` sets the
importances at or below τ of each sum to 0 and divides the rest by their sum (LM-TT's
``apply_threshold_and_renormalize``, which its app applies at the slider's τ): the same edges as without it
(an importance above τ stays above τ), weights that sum to 1 over each node's kept parts; with
``combine_heads=True`` too, the heads are summed per source token after it — LM-TT's app graph, whose token
edges are those where one head exceeds τ. ``measure="norm_share"`` is a variant (not the paper's): importance =
‖z_k‖₂ / Σ_m ‖z_m‖₂.

Cost: the time is in scoring the parts of every reached row: per layer and reached row, H·n + 2 parts of d
numbers built (:func:`layer_parts`), subtracted from the sum, |·| and summed — memory-bound element work, about
two orders of magnitude slower per number than the FLOP rate of a matrix product (issue 29: a 128-token smollm2
page at τ = 0.01 took 51–71 s against 0.2 s estimated from FLOPs). :func:`cost` estimates the rows reached
from τ and n as measured (:func:`rows_reached`; every row at τ = 0) and counts the numbers scored and the edge
records built, each at its measured rate (the ``routes`` row of :data:`normviz.methods.cost.RATES`, option
``routes_numbers_per_second``; ``EDGE_SECONDS``: ``benchmarks/bench_routes.py --estimate``), through the one cost
pre-flight (:func:`normviz.methods.cost.refuse_over_budget`). :func:`check` refuses above the option
``routes_budget_s`` before anything runs; a run also stops itself (:class:`DeadlineError`) past its deadline —
``routes_deadline_s``, else
``DEADLINE_FACTOR`` × the budget, else ``DEFAULT_DEADLINE_S`` — checked at every layer and chunk of rows.
Memory: rows in chunks of at most ``chunk_bytes``.
"""

from __future__ import annotations

import json
import time
from contextlib import nullcontext
from dataclasses import dataclass, field

import numpy as np
import torch

from ..core.errors import DeadlineError, InputError, NormvizError, NotApplicableError
from ..methods.base import DEADLINE_FACTOR, DEFAULT_DEADLINE_S, Budget, Request
from ..methods.cost import RATES, estimate_s, refuse_over_budget
from ..methods.family import Family
from ..methods.registry import register_computation
from ..models.floor import require_row
from .direct import layer_parts
from .predict import position_index

MEASURES = ("proximity", "norm_share")
BUDGET = Budget("routes", rates="routes")  # option routes_budget_s; its rate: cost.RATES["routes"]
CHUNK_BYTES = 64 * 2**20


# measured on the shared 2-core CPU under load 9–14 (benchmarks/bench_routes.py --estimate, smollm2 float32;
# docs/routes.md): one edge record, rows reached per layer × τ / n (the numbers scored per second: cost.RATES)
ROUTES_NUMBERS_PER_SECOND = RATES["routes"]  # the one rate table's row (option routes_numbers_per_second)
EDGE_SECONDS = 3e-5
REACH = 0.007  # smollm2: 0.4–0.7 of the rows at τ = 0.01, 0.06–0.10 at τ = 0.04, one per layer at τ = 0.2


def rows_reached(n: int, n_layers: int, tau: float) -> float:
    """The rows whose parts are scored, all layers together: every row at τ = 0, else per layer
    min(n, max(1, REACH · n / τ)) — measured, not a bound (a run past its estimate meets its deadline)."""
    return float(n_layers * (n if tau <= 0 else min(n, max(1.0, REACH * n / tau))))


def work(request: Request, tau: float = 0.0) -> tuple[float, float]:
    """(numbers scored, edge records) of the routes at threshold τ: H·n + 2 parts of d numbers per row scored;
    per row at most H·n + 2 edges, about 2 + 0.05/τ measured (2.5–4.4 at τ = 0.04–0.01)."""
    n, H, d = request.n_tokens, request.n_heads, request.d_model
    rows = rows_reached(n, request.n_layers, tau)
    per_row = H * n + 2 if tau <= 0 else min(H * n + 2, 2 + 0.05 / tau)
    return rows * (H * n + 2) * d, rows * per_row


def cost(request: Request, options: dict, tau: float = 0.0) -> float | None:
    """Estimated seconds of the routes at τ on the request's device (None: no rate known there): the numbers
    scored at the ``routes`` rate, plus ``EDGE_SECONDS`` per edge record (:func:`normviz.methods.cost.estimate_s`)."""
    return estimate_s(request, options, BUDGET, *_work(tau))


def _work(tau: float):
    """(numbers scored, seconds of the edge records) as functions of the request, at τ."""
    return (lambda r: work(r, tau)[0]), (lambda r: work(r, tau)[1] * EDGE_SECONDS)


def check(request: Request, options: dict, threshold: float = 0.0) -> None:
    """TooCostlyError when the routes at ``threshold`` would exceed ``routes_budget_s`` (their estimated
    seconds, :func:`cost`; τ = 0, the default, is the worst case: every row reached), through the one pre-flight."""
    numbers, edges_s = _work(threshold)
    refuse_over_budget(
        request,
        f"the routes at τ = {threshold:g}",
        options,
        BUDGET,
        numbers,
        note="A higher τ reaches fewer rows.",
        extra_s=edges_s,
    )


register_computation(Family(name="routes", keys=(), own_check=check, budget=BUDGET))


def deadline_s(options: dict) -> float:
    """How long one routes call may run before it stops itself: option ``routes_deadline_s``, else
    ``DEADLINE_FACTOR`` × ``routes_budget_s`` (the estimates are rough), else ``DEFAULT_DEADLINE_S``."""
    if options.get("routes_deadline_s") is not None:
        return float(options["routes_deadline_s"])
    budget = BUDGET.seconds(options)
    return DEADLINE_FACTOR * budget if budget is not None else DEFAULT_DEADLINE_S


def threshold_value(threshold) -> float:
    """τ as a float in [0, 1); InputError for anything else (nan, a string, 1 …), never an empty graph."""
    try:
        tau = float(threshold)
    except (TypeError, ValueError):
        raise InputError(f"threshold must be a number between 0 and 1, got {threshold!r}.") from None
    if not 0 <= tau < 1:  # nan fails this too
        raise InputError(f"threshold must be in [0, 1), got {threshold!r}.")
    return tau


def proximity(parts: torch.Tensor, whole: torch.Tensor) -> torch.Tensor:
    """prox(z, y) = max(‖y‖₁ − ‖z − y‖₁, 0) for parts [..., m, d] of wholes [..., d] → [..., m]."""
    y = whole.unsqueeze(-2)
    return (whole.abs().sum(-1, keepdim=True) - (parts - y).abs().sum(-1)).clamp_min(0)


def importance(parts: torch.Tensor, whole: torch.Tensor, measure: str = "proximity") -> torch.Tensor:
    """Each part's normalised importance [..., m] (sums to 1 over m, or 0 when every score is 0)."""
    score = proximity(parts, whole) if measure == "proximity" else parts.norm(dim=-1)
    total = score.sum(-1, keepdim=True)
    return torch.where(total > 0, score / torch.where(total > 0, total, 1), torch.zeros_like(score))


def renormalised(weights: torch.Tensor, tau: float) -> torch.Tensor:
    """Importances [..., m] with those ≤ τ set to 0 and the rest divided by their sum (0 where none is left)."""
    w = torch.where(weights > tau, weights, torch.zeros_like(weights))
    total = w.sum(-1, keepdim=True)
    return torch.where(total > 0, w / torch.where(total > 0, total, 1), w)


@dataclass
class Routes:
    """The routes to the prediction at ``position``: nodes and weighted edges (importance > ``threshold``).

    nodes: {"id", "kind": "x" (residual stream entering layer ``layer``; layer L = the output) | "a" (after
    layer ``layer``'s attention), "layer", "token"} (+ "bias": b^O's share on a-nodes).
    edges: {"source", "target", "kind": "head" | "residual" | "ff", "layer", "head" (head edges of
    combine_heads=False, else None), "from_token", "to_token", "weight"}.
    """

    position: int
    threshold: float
    measure: str
    tokens: list[str]
    n_layers: int
    n_heads: int
    nodes: list[dict] = field(default_factory=list)
    edges: list[dict] = field(default_factory=list)
    renormalised: bool = False  # weights renormalised over each node's parts above τ (routes(renormalise=True))

    def arrays(self) -> dict:
        """The edges as numpy columns (kind as 0 head / 1 residual / 2 ff; head −1 when none; source/target
        layers in the node numbering below: x^l → 2l, a^l → 2l + 1)."""
        kinds = {"head": 0, "residual": 1, "ff": 2}
        e = self.edges
        return {
            "edge_kind": np.array([kinds[x["kind"]] for x in e], dtype=np.int8),
            "edge_layer": np.array([x["layer"] for x in e], dtype=np.int32),
            "edge_head": np.array([-1 if x["head"] is None else x["head"] for x in e], dtype=np.int32),
            "edge_from_token": np.array([x["from_token"] for x in e], dtype=np.int32),
            "edge_to_token": np.array([x["to_token"] for x in e], dtype=np.int32),
            "edge_weight": np.array([x["weight"] for x in e], dtype=np.float64),
        }

    def to_dict(self) -> dict:
        return {
            "position": self.position,
            "threshold": self.threshold,
            "measure": self.measure,
            "renormalised": self.renormalised,
            "tokens": list(self.tokens),
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "nodes": self.nodes,
            "edges": self.edges,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def above(self, threshold: float) -> "Routes":
        """The routes at a higher threshold (a sub-graph, re-extracted backwards; no model work)."""
        threshold = threshold_value(threshold)
        if self.renormalised:
            raise InputError(
                "above(): renormalised routes depend on τ at every node (their weights are shares of "
                "the parts above it); compute routes(..., threshold=τ, renormalise=True) again."
            )
        if threshold < self.threshold:
            raise InputError(
                f"above({threshold}): the threshold can only rise from {self.threshold} (compute the "
                "routes again to lower it)."
            )
        start = f"x{self.n_layers}_{self.position}"
        kept = [e for e in self.edges if e["weight"] > threshold]
        by_target: dict[str, list[dict]] = {}
        for e in kept:
            by_target.setdefault(e["target"], []).append(e)
        seen, todo, edges = {start}, [start], []
        while todo:
            for e in by_target.get(todo.pop(), []):
                edges.append(e)
                if e["source"] not in seen:
                    seen.add(e["source"])
                    todo.append(e["source"])
        nodes = [nd for nd in self.nodes if nd["id"] in seen]
        return Routes(
            self.position,
            float(threshold),
            self.measure,
            self.tokens,
            self.n_layers,
            self.n_heads,
            nodes,
            sorted(edges, key=_order),
        )


def _order(e: dict):
    return (-e["layer"], e["kind"] != "ff", e["to_token"], e["from_token"], -1 if e["head"] is None else e["head"])


def _chunks(rows: list[int], per_row: int, chunk_bytes: int):
    step = max(1, chunk_bytes // max(1, per_row))
    for k in range(0, len(rows), step):
        yield rows[k : k + step]


@torch.no_grad()
def routes(
    session,
    position: int = -1,
    threshold: float = 0.04,
    *,
    measure: str = "proximity",
    combine_heads: bool = False,
    renormalise: bool = False,
) -> Routes:
    """The information-flow routes to position ``position``'s prediction (see the module docstring): edges
    whose importance exceeds ``threshold``, extracted backwards from x^L_i (``renormalise``: their weights
    renormalised over each node's parts above it, as LM-TT's app does). Pre-LN self-attention stacks."""
    if measure not in MEASURES:
        raise NormvizError(f"measure must be one of {', '.join(MEASURES)}, got {measure!r}.")
    tau = threshold_value(threshold)
    if getattr(session, "is_encoder_decoder", False):
        raise NotApplicableError(
            "routes follow one self-attention stack; encoder–decoders are not supported yet "
            "(explain the decoder with Session.explain)."
        )
    lm = session.lm
    require_row(lm, "routes")  # the raw-attention floor: needs an architecture row
    if lm.spec.placement != "pre":
        raise NotApplicableError(
            f"routes need a pre-LN stack, whose residual stream is a plain sum of the blocks' "
            f"writes; {lm.name!r} normalises after every block (post-LN)."
        )
    n = session.n_tokens
    i = position_index(position, n)
    options = dict(session.options)
    check(session.request, options, tau)
    lock = getattr(getattr(session, "store", None), "lock", None) or nullcontext()
    with lock:
        views = session.layers()
        try:
            return _extract(
                views,
                i,
                tau,
                measure,
                combine_heads,
                list(session.labels),
                int(options.get("chunk_bytes", CHUNK_BYTES)),
                Deadline(deadline_s(options)),
                bool(renormalise),
            )
        finally:
            for v in views:
                v.clear()


class Deadline:
    """A cooperative deadline: :meth:`check` raises DeadlineError once ``seconds`` have passed since creation."""

    clock = staticmethod(time.monotonic)

    def __init__(self, seconds: float):
        self.seconds, self.start = float(seconds), self.clock()

    def check(self, layer: int) -> None:
        spent = self.clock() - self.start
        if spent > self.seconds:
            raise DeadlineError(
                f"the routes were stopped at layer {layer} after {spent:.0f} s (deadline "
                f"{self.seconds:.0f} s: option routes_deadline_s, else {DEADLINE_FACTOR:g} × "
                "routes_budget_s). Raise τ (fewer rows are reached) or shorten the text."
            )


def _extract(
    views,
    i: int,
    tau: float,
    measure: str,
    combine: bool,
    tokens: list[str],
    chunk: int,
    deadline: Deadline,
    renormalise: bool = False,
) -> Routes:
    L = len(views)
    H = views[0].p.n_heads
    out = Routes(
        position=i, threshold=tau, measure=measure, tokens=tokens, n_layers=L, n_heads=H, renormalised=renormalise
    )
    kept = (lambda w: renormalised(w, tau)) if renormalise else (lambda w: w)  # noqa: E731
    nodes = {f"x{L}_{i}": {"id": f"x{L}_{i}", "kind": "x", "layer": L, "token": i}}
    edges: list[dict] = []
    reached = {i}  # tokens of x^{l+1} reached
    for l in range(L - 1, -1, -1):
        deadline.check(l)
        ctx = views[l]
        rows = sorted(reached)
        # the FF sum: x^{l+1} = a^l + FF
        rec = ctx.rec
        r = torch.as_tensor(rows, device=ctx.device)
        a, x_next = rec.z_attn[r], rec.out[r]
        w = kept(importance(torch.stack([x_next - a, a], 1), x_next, measure))  # [r, 2]: ff, residual
        a_rows = []
        for k, t in enumerate(rows):
            hit = False
            for kind, m in (("ff", 0), ("residual", 1)):
                if float(w[k, m]) > tau:
                    edges.append(_edge(f"a{l}_{t}", f"x{l + 1}_{t}", kind, l, None, t, t, float(w[k, m])))
                    hit = True
            if hit:
                a_rows.append(t)
        # the attention sum: a^l = x^l + Σ_h Σ_j heads + b^O
        reached = set()
        per_row = H * ctx.n * ctx.rec.x.shape[-1] * ctx.rec.x.element_size() * 3
        for part_rows in _chunks(a_rows, per_row, chunk):
            deadline.check(l)
            p = layer_parts(ctx, part_rows)
            R, n, d = p.heads.shape[0], p.heads.shape[2], p.heads.shape[3]
            parts = torch.cat(
                [p.heads.reshape(R, H * n, d), p.residual[:, None], p.attn_bias.to(p.heads.dtype).expand(R, 1, d)], 1
            )
            wa = kept(importance(parts, rec.z_attn[p.rows], measure))  # [R, H·n + 2]
            heads_w = wa[:, : H * n].reshape(R, H, n)
            for k, t in enumerate(part_rows):
                nodes[f"a{l}_{t}"] = {"id": f"a{l}_{t}", "kind": "a", "layer": l, "token": t, "bias": float(wa[k, -1])}
                if float(wa[k, H * n]) > tau:
                    edges.append(_edge(f"x{l}_{t}", f"a{l}_{t}", "residual", l, None, t, t, float(wa[k, H * n])))
                    reached.add(t)
                hw = heads_w[k].sum(0, keepdim=True) if combine else heads_w[k]
                for h, j in (hw > tau).nonzero().tolist():
                    edges.append(
                        _edge(f"x{l}_{j}", f"a{l}_{t}", "head", l, None if combine else h, j, t, float(hw[h, j]))
                    )
                    reached.add(j)
        for t in reached:
            nodes.setdefault(f"x{l}_{t}", {"id": f"x{l}_{t}", "kind": "x", "layer": l, "token": t})
        ctx.clear()
    for t in reached:
        nodes.setdefault(f"x0_{t}", {"id": f"x0_{t}", "kind": "x", "layer": 0, "token": t})
    # x-nodes of layers between are added as edges land on them
    for e in edges:
        for end, tok in ((e["source"], e["from_token"]), (e["target"], e["to_token"])):
            if end not in nodes:
                kind, layer = end[0], int(end[1:].split("_")[0])
                nodes[end] = {"id": end, "kind": kind, "layer": layer, "token": tok}
    out.nodes = sorted(nodes.values(), key=lambda nd: (nd["layer"], nd["kind"] == "a", nd["token"]))
    out.edges = sorted(edges, key=_order)
    return out


def _edge(source: str, target: str, kind: str, layer: int, head, j: int, i: int, weight: float) -> dict:
    return {
        "source": source,
        "target": target,
        "kind": kind,
        "layer": layer,
        "head": head,
        "from_token": j,
        "to_token": i,
        "weight": weight,
    }
