"""Attention flow (Abnar & Zuidema 2020): maximum flow through the layered attention graph.

Nodes (k, t): token t at layer k, k = 0 (the input) … L. For every layer l an edge (l+1, i) → (l, j) with
capacity Â_l[i, j], where Â_l = rownorm(0.5·mean_h α_l + 0.5·I) is the matrix attention rollout uses.
``flow[l, i, j]`` is the maximum flow from (l+1, i) to the input node (0, j), each row then divided by its
sum, as in the authors' code (their ``compute_flows``).

Solvers (option ``flow_solver``):

* ``"igraph"`` (default when python-igraph is installed): igraph's push-relabel on the float64 capacities,
  no scaling; about 3× faster than scipy here; agrees with networkx's Edmonds–Karp to ~1e-16 (tests).
* ``"scipy"``: Dinic (``scipy.sparse.csgraph.maximum_flow``), which needs int32 capacities, on capacities
  scaled by S = 2^29 and rounded: every capacity is off by at most δ = 2^-30 ≈ 9.3e-10. The max flow equals
  the min cut, so a flow value moves by at most δ · (number of edges in the min cut), never more than
  δ·(l+1)·n² (the number of edges); row normalisation at most doubles that relative error. In practice ~1e-9.

Cost: n² max-flow problems per layer on graphs of (l+1)·n² edges. Two exact shortcuts: layer 0 is Â_0
itself (a single edge), layer 1 is Σ_k min(Â_1[i,k], Â_0[k,j]) (disjoint two-edge paths). Inputs over a
configurable size are refused before the forward pass with :class:`~normviz.core.errors.TooCostlyError`:
options ``flow_max_tokens`` (default 96) and ``flow_max_work`` (default 2e8, the estimate
Σ_l n²·(l+1)·n² of edge visits; 6 layers × 32 tokens ≈ 2.2e7, 1–4 s here on 2 busy cores).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.sparse import csr_array
from scipy.sparse.csgraph import maximum_flow

from ..core.errors import NormvizError, TooCostlyError
from . import papers
from .base import Inputs, KeyInfo, Output, Request
from .family import Family
from .rollouts import (
    attention_with_residual,
    normalization_option,
    receptive_field,
    row_normalize,
    uniform_with_residual,
)

SCALE = 2**29
MAX_TOKENS = 96
MAX_WORK = 2e8


def estimated_work(n: int, n_layers: int) -> float:
    """Σ_l n² problems × (l+1)·n² edges: a proxy for the solver's cost."""
    return float(n) ** 4 * n_layers * (n_layers + 1) / 2


def check(request: Request, key: str, options: dict) -> None:
    solver_option(options)
    twice = request.causal and normalization_option(options) == "receptive_field"  # + the baseline's flow
    check_cost(request.n_tokens, request.n_layers, options, runs=2 if twice else 1)


def check_cost(n: int, n_layers: int, options: dict | None = None, runs: int = 1) -> None:
    """Raise TooCostlyError when attention flow would take too long for n tokens and n_layers layers (``runs``
    flows of that size: 2 with a receptive-field baseline)."""
    options = options or {}
    max_tokens = int(options.get("flow_max_tokens", MAX_TOKENS))
    max_work = float(options.get("flow_max_work", MAX_WORK))
    work = runs * estimated_work(n, n_layers)
    if n > max_tokens or work > max_work:
        raise TooCostlyError(
            f"Attention flow for {n} tokens × {n_layers} layers would solve {n * n * n_layers:,} max-flow problems "
            f"on graphs of up to {n_layers * n * n:,} edges (estimated work {work:.2g}; limits: "
            f"flow_max_tokens={max_tokens}, flow_max_work={max_work:.2g}). Use a shorter text (--max-tokens), "
            "use attention rollout (rollout_attention) instead, or raise the limits with "
            "--option flow_max_tokens=N --option flow_max_work=W (options={...} in Python) if you can wait."
        )


def _layer_graph(a_hat: np.ndarray, top: int) -> csr_array:
    """The layered graph of layers 0 … top+1 with integer capacities round(S·Â): node (k, t) = k·n + t."""
    n = a_hat.shape[-1]
    rows, cols, caps = [], [], []
    for layer in range(top + 1):
        cap = np.rint(a_hat[layer] * SCALE).astype(np.int64)
        i, j = np.nonzero(cap)
        rows.append((layer + 1) * n + i)
        cols.append(layer * n + j)
        caps.append(cap[i, j])
    size = (top + 2) * n
    g = csr_array(
        (np.concatenate(caps).astype(np.int32), (np.concatenate(rows), np.concatenate(cols))), shape=(size, size)
    )
    g.sum_duplicates()
    return g


def _flows_scipy(a_hat: np.ndarray, top: int, pairs) -> list[float]:
    g = _layer_graph(a_hat, top)
    n = a_hat.shape[-1]
    return [maximum_flow(g, (top + 1) * n + i, j).flow_value / SCALE for i, j in pairs]


def _flows_igraph(a_hat: np.ndarray, top: int, pairs) -> list[float]:
    import igraph

    n = a_hat.shape[-1]
    edges, caps = [], []
    for layer in range(top + 1):
        i, j = np.nonzero(a_hat[layer])
        edges.append(np.stack([(layer + 1) * n + i, layer * n + j], 1))
        caps.append(a_hat[layer][i, j])
    g = igraph.Graph(n=(top + 2) * n, edges=np.concatenate(edges).tolist(), directed=True)
    cap = np.concatenate(caps).tolist()
    return [g.maxflow_value((top + 1) * n + i, j, cap) for i, j in pairs]


def solver_option(options: dict | None) -> str:
    """``flow_solver``: "igraph" (default when python-igraph is installed) or "scipy"."""
    choice = str((options or {}).get("flow_solver", "auto")).lower()
    if choice == "auto":
        import importlib.util

        return "igraph" if importlib.util.find_spec("igraph") is not None else "scipy"
    if choice not in ("igraph", "scipy"):
        raise NormvizError(f"flow_solver={choice!r} is not known; use igraph or scipy.")
    return choice


def attention_flow(a_hat: np.ndarray, solver: str = "auto") -> np.ndarray:
    """flow[l, i, j] = max flow (l+1, i) → (0, j) in the graph of capacities Â (rows then normalised)."""
    a_hat = np.asarray(a_hat, dtype=np.float64)
    solver = solver_option({"flow_solver": solver})
    n_layers, n, _ = a_hat.shape
    q = np.rint(a_hat * SCALE) / SCALE if solver == "scipy" else a_hat  # the capacities the solver sees
    out = np.zeros((n_layers, n, n), dtype=np.float64)
    out[0] = q[0]
    if n_layers > 1:
        out[1] = np.minimum(q[1][:, :, None], q[0][None, :, :]).sum(1)
    causal = bool(np.all(np.triu(q, 1) == 0))  # then no path leads from token i to a later input token
    pairs = [(i, j) for i in range(n) for j in range(i + 1 if causal else n)]
    flows = _flows_igraph if solver == "igraph" else _flows_scipy
    for top in range(2, n_layers):
        values = flows(a_hat, top, pairs)
        for (i, j), v in zip(pairs, values):
            out[top, i, j] = v
    return row_normalize(out)


@functools.lru_cache(maxsize=8)
def baseline_flow(n: int, n_layers: int, solver: str) -> np.ndarray:
    """The flow of the receptive-field baseline: every layer Û = rownorm(0.5·U + 0.5·I) (read-only; cached, it
    depends on n and the depth only)."""
    base = attention_flow(np.repeat(uniform_with_residual(n)[None], n_layers, axis=0), solver)
    base.flags.writeable = False
    return base


FAMILY = Family(
    name="maxflow",
    order=80,
    keys=(
        KeyInfo(
            "flow",
            "Attention flow",
            False,
            "Max flow from token i at layer l to input token j on the layered graph with capacities "
            "Â = rownorm(0.5·A + 0.5·I), rows normalised (Abnar & Zuidema 2020). Decoders: "
            "--option rollout_normalization=receptive_field divides by the flow of uniform causal attention.",
            short="attention flow",
        ),
    ),
    group="across layers",
    unit="score (rows sum to ~1)",
    requires={"flow": ("attention",)},
    opt_in=("flow",),
    heavy=True,  # costly: the public app computes it in the worker process (normviz.workers.process)
    references=(papers.ABNAR_2020,),
)


def compute(inputs: Inputs, keys, options) -> Output:
    """The flow; with ``rollout_normalization=receptive_field`` on a decoder, divided entry by entry by the flow
    of the baseline graph Û (:func:`baseline_flow`), rows renormalised, as the rollouts are
    (:mod:`normviz.methods.rollouts`)."""
    att = inputs.arrays["attention"]
    a_hat = attention_with_residual(att.astype(np.float64))
    solver = solver_option(options)
    flow = attention_flow(a_hat, solver)
    note = f"max flow on capacities Â = rownorm(0.5·A + 0.5·I), rows normalised; solver: {solver}"
    mode = normalization_option(options)
    if mode == "receptive_field" and inputs.request.causal:
        base = baseline_flow(a_hat.shape[-1], a_hat.shape[0], solver)
        flow, rf_note = receptive_field(
            flow,
            base,
            "the flow of uniform causal attention with the residual half (capacities rownorm(0.5·U + 0.5·I))",
        )
        note += "; " + rf_note
    elif mode == "receptive_field":
        note += "; receptive_field normalisation ignored: an encoder's tokens all see every token"
    return Output({"flow": flow.astype(att.dtype)}, {"flow": note})
