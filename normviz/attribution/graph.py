"""An exact attribution graph of one prediction: input tokens, heads and FF blocks as nodes, the logit at the end.

With the model's own coefficients frozen at the recorded pass (α, each norm's real scale, the FF's
integrated-gradient factors: the frozen-coefficient network of ``explain().sources``), every component c of a
pre-LN stack writes a linear function of the residual stream it reads, plus a constant:

    head (l, h):  W_c = α^h (N1(x^l) W^V_h W^O_h)            constant (β1 W^V_h + b^V_h) W^O_h, and b^O
    FF l:         W_c = ((N2(z^l) W_in) ⊙ θ [+ (N2(z^l) W_up) ⊙ c_up]) W_out      constant: its biases' part

(N the norm's linear part with its real scale; z^l = x^l + the layer's heads' writes + biases, what the FF
reads). Tokens write their embedding output x⁰_t at position t; every constant goes to one node, "biases".

Let G_c be the adjoint of the logit (difference) at the point of the residual stream just after c writes (one
backward pass through the frozen network), and R_c = M_cᵀ G_c the *reader* of c (M_c its linear map). Then

    node value   v(c) = ⟨G_c, W_c⟩                 (c's total effect on the logit; tokens: = sources[t])
    edge         e(s → c) = ⟨R_c, W_s⟩              for s written before c reads (direct effect through c)
    to the logit e(s → logit) = ⟨r, W_s[i]⟩          (r the readout vector: the direct parts of explain())

and both completeness identities hold exactly: Σ_s e(s → c) = v(c) (incoming, the biases' edge included) and
Σ_c e(s → c) + e(s → logit) = v(s) (outgoing). Σ_t v(t) + v(biases) = the logit (difference).

Pruning follows circuit-tracer (Ameisen et al. 2025, "Circuit Tracing"): rows of |A| normalised, influence on the
logit through all paths (A + A² + …), nodes kept up to a cumulative ``node_threshold`` of it, then edges up to
``edge_threshold`` of the edge influence; tokens and the logit always kept. Heads are nodes (circuit-tracer has
no head nodes and needs a trained transcoder per model); no error nodes are needed: the split is exact.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from ..core import memory
from ..core.errors import NormvizError, NotApplicableError, TooCostlyError
from ..methods.cost import longest
from ..models.floor import require_row
from .adjoint import ff_adjoint, norm_adjoint
from .predict import token_text

GENERATOR = "normviz"
SCHEMA = (
    "Neuronpedia graph schema 1.0.0 (apps/webapp/app/api/graph/graph-schema.json, hijohnnylin/neuronpedia, "
    "file at 3c068b76, repository at ebb8426f)"
)


@dataclass
class Graph:
    """Nodes (tokens, (layer, head), (layer, FF), biases, logit) and exact edges; see the module docstring.

    kinds [N]       "embedding" | "attention head" | "mlp" | "bias" | "logit"
    names [N]       readable labels
    layers [N]      the layer (-1 for tokens and biases, L for the logit)
    heads [N]       the head (-1 otherwise)
    positions [N]   tokens: their position; components: where their effect on the logit is largest; logit: i
    values [N]      v(c): each node's total effect on the logit (difference); the logit's: total
    adjacency [N,N] e(source → target) as adjacency[target, source]
    influence [N]   cumulative influence score (circuit-tracer's, for pruning); node_mask, edge_mask: kept
    """

    tokens: list[str]
    token_ids: list[int]
    position: int
    token: int
    token_text: str
    foil: int | None
    foil_text: str | None
    total: float
    prob: float
    kinds: list[str]
    names: list[str]
    layers: np.ndarray
    heads: np.ndarray
    positions: np.ndarray
    values: np.ndarray
    adjacency: np.ndarray
    influence: np.ndarray
    node_mask: np.ndarray
    edge_mask: np.ndarray
    node_threshold: float
    edge_threshold: float
    model: str = ""
    prompt: str = ""
    seconds: dict = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    def kept_edges(self) -> list[tuple[int, int, float]]:
        """(source, target, weight) of the kept edges, largest |weight| first."""
        t, s = np.nonzero(self.edge_mask)
        w = self.adjacency[t, s]
        order = np.argsort(-np.abs(w))
        return [(int(s[k]), int(t[k]), float(w[k])) for k in order]

    # ---------------------------------------------------------------- exports
    def node_ids(self) -> list[str]:
        """Neuronpedia node ids: tokens E_{vocab}_{pos}; heads {layer}_{head}_{pos}; FF {layer}_{H}_{pos};
        biases B_0_0; the logit {L+1}_{vocab}_{pos} (circuit-tracer's conventions for tokens and logits)."""
        H = int(self.heads.max()) + 1 if (self.heads >= 0).any() else 0
        L = int(self.layers[-1])
        out = []
        for k, kind in enumerate(self.kinds):
            pos = int(self.positions[k])
            if kind == "embedding":
                out.append(f"E_{self.token_ids[pos]}_{pos}")
            elif kind == "attention head":
                out.append(f"{int(self.layers[k])}_{int(self.heads[k])}_{pos}")
            elif kind == "mlp":
                out.append(f"{int(self.layers[k])}_{H}_{pos}")
            elif kind == "bias":
                out.append("B_0_0")
            else:
                out.append(f"{L + 1}_{self.token}_{pos}")
        return out

    def to_neuronpedia(self, slug: str | None = None, scan: str | None = None) -> dict:
        """The pruned graph in Neuronpedia's graph JSON (:data:`SCHEMA`): metadata, qParams, nodes, links.
        Heads and FF blocks are typed as their feature nodes ("cross layer transcoder", the type their graph
        scores count as features; our kind is in each label), the biases node as an input ("embedding", with
        feature -1); ``slug`` and ``scan`` are made names their save route takes (:func:`neuronpedia_name`)."""
        ids = self.node_ids()
        H = int(self.heads.max()) + 1 if (self.heads >= 0).any() else 0
        nodes = []
        for k in np.nonzero(self.node_mask)[0]:
            kind, pos = self.kinds[k], int(self.positions[k])
            if kind == "embedding":
                layer, feature, js = "E", pos, f"E_{self.token_ids[pos]}-{pos}"
            elif kind == "logit":
                layer, feature, js = str(int(self.layers[k]) + 1), self.token, f"L_{self.token}-{pos}"
            elif kind == "bias":
                layer, feature, js = "E", -1, "B_0-0"
            else:
                feature = int(self.heads[k]) if kind == "attention head" else H
                layer, js = str(int(self.layers[k])), f"{int(self.layers[k])}_{feature}-{pos}"
            clerp = self.names[k] + (f" ({kind})" if kind in ("attention head", "mlp") else "")
            if kind == "logit":  # the loader reads the probability from "(p=…)" in the logit's label
                vs = f' − "{_quoted(self.foil_text)}"' if self.foil is not None else ""
                clerp = f'Output "{_quoted(self.token_text)}"{vs} (p={self.prob:.3f})'
            node = {
                "node_id": ids[k],
                "feature": int(feature),
                "layer": layer,
                "ctx_idx": pos,
                "feature_type": NEURONPEDIA_TYPES[kind],
                "jsNodeId": js,
                "clerp": clerp,
                "influence": float(self.influence[k]),
                "activation": float(self.values[k]),
            }
            if kind == "logit":
                node.update(token_prob=float(self.prob), is_target_logit=True)
            nodes.append(node)
        kept = set(np.nonzero(self.node_mask)[0].tolist())
        links = [
            {"source": ids[s], "target": ids[t], "weight": w}
            for s, t, w in self.kept_edges()
            if s in kept and t in kept
        ]
        vs = f" vs {self.foil_text!r}" if self.foil is not None else ""
        meta = {
            "slug": neuronpedia_name(slug or "normviz-graph", lower=True),
            "scan": neuronpedia_name(scan or self.model or "unknown"),
            "prompt_tokens": list(self.tokens),
            "prompt": self.prompt or "".join(self.tokens),
            "node_threshold": self.node_threshold,
            "info": {
                "description": f"normviz exact attribution graph of {self.token_text!r}{vs} at position "
                f"{self.position}: heads and FF blocks as nodes, edges = direct effects "
                "through the frozen-coefficient network (they sum to each node's value).",
                "generator": {"name": GENERATOR, "version": _version()},
                "create_time_ms": int(time.time() * 1000),
            },
            "pruning_settings": {"node_threshold": self.node_threshold, "edge_threshold": self.edge_threshold},
        }
        return {
            "metadata": meta,
            "qParams": {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""},
            "nodes": nodes,
            "links": links,
        }

    def to_arrays(self) -> dict:
        """Every field as numpy arrays (``np.savez``)."""
        return {
            "tokens": np.array(self.tokens),
            "token_ids": np.array(self.token_ids),
            "position": self.position,
            "token": self.token,
            "total": self.total,
            "kinds": np.array(self.kinds),
            "names": np.array(self.names),
            "layers": self.layers,
            "heads": self.heads,
            "positions": self.positions,
            "values": self.values,
            "adjacency": self.adjacency,
            "influence": self.influence,
            "node_mask": self.node_mask,
            "edge_mask": self.edge_mask,
            "node_threshold": self.node_threshold,
            "edge_threshold": self.edge_threshold,
        }

    def to_json(self) -> str:
        """Plain JSON: the nodes with their values and the kept edges."""
        ids = self.node_ids()
        kept = np.nonzero(self.node_mask)[0]
        return json.dumps(
            {
                "tokens": self.tokens,
                "position": self.position,
                "token": self.token_text,
                "foil": self.foil_text,
                "total": self.total,
                "nodes": [
                    {
                        "id": ids[k],
                        "name": self.names[k],
                        "kind": self.kinds[k],
                        "layer": int(self.layers[k]),
                        "head": int(self.heads[k]),
                        "position": int(self.positions[k]),
                        "value": float(self.values[k]),
                        "influence": float(self.influence[k]),
                    }
                    for k in kept
                ],
                "edges": [{"source": ids[s], "target": ids[t], "weight": w} for s, t, w in self.kept_edges()],
            },
            ensure_ascii=False,
        )

    def save(self, path: str, slug: str | None = None) -> None:
        """``.npz``: :meth:`to_arrays`; ``.json``: Neuronpedia's format (``.plain.json``: :meth:`to_json`); the
        ending in any case (G.JSON), the file written under the name given."""
        p = str(path)
        kind = graph_suffix(p)
        if kind == ".npz":
            with open(p, "wb") as f:
                np.savez(f, **self.to_arrays())
        elif kind == ".plain.json":
            with open(p, "w", encoding="utf-8") as f:
                f.write(self.to_json())
        else:
            with open(p, "w", encoding="utf-8") as f:
                json.dump(self.to_neuronpedia(slug), f, ensure_ascii=False)


# our node kinds as Neuronpedia's graph code types them: heads and FF blocks as feature nodes, the biases as an
# input node (tokens are theirs: "embedding"); docs/qk-and-graph.md says what is kept of ours
NEURONPEDIA_TYPES = {
    "embedding": "embedding",
    "attention head": "cross layer transcoder",
    "mlp": "cross layer transcoder",
    "bias": "embedding",
    "logit": "logit",
}


def neuronpedia_name(name: str, lower: bool = False) -> str:
    """A slug or scan name Neuronpedia's save route takes: no '/' (a Hub id 'org/model' becomes 'org-model', a
    local path its last folder), no spaces: letters, digits, '.', '_' and '-' only."""
    import re

    text = str(name).strip().rstrip("/\\")
    if text.startswith(("/", ".", "~")) or "\\" in text:  # a local path: its folder's name
        text = re.split(r"[/\\]", text)[-1] or "model"
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or "normviz"
    return text.lower() if lower else text


def _quoted(text: str | None) -> str:
    """A token's text inside the logit label's quotes: '"' and '\\' escaped (a predicted '"' closed the quote
    early and broke their logit-difference link)."""
    return (text or "").replace("\\", "\\\\").replace('"', '\\"')


def graph_suffix(path: str, what: str = "graph file") -> str:
    """ ".npz", ".plain.json" or ".json" by ``path``'s ending in any case (the one rule of :meth:`Graph.save` and
    the CLI's check before the model loads), else a NormvizError."""
    low = str(path).lower()
    for kind in (".npz", ".plain.json", ".json"):
        if low.endswith(kind):
            return kind
    raise NormvizError(f"{what} {str(path)!r}: name a .json (Neuronpedia), .plain.json or .npz file.")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("normviz")
    except Exception:  # pragma: no cover - not installed
        return "0"


# ---------------------------------------------------------------- the frozen network's pieces
def _norm_lin(norm, v: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """N(v) = γ⊙C(v)/s_i with s_i from the norm's real input z (C centres for LayerNorm)."""
    return norm.linear_part(v) / norm.scale(z)[:, None]


def _kv_cols(p, h: int) -> slice:
    kv = h // (p.n_heads // p.n_kv_heads)
    return slice(kv * p.head_dim, (kv + 1) * p.head_dim)


def _head_writes(ctx, stream: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(W [H, n, d]: α^h (N1(stream) W^V_h W^O_h), the attention block's constant [d]: b^O + Σ_h (β1 W^V_h + b^V_h)
    W^O_h), N1's scale frozen at the layer's real input."""
    p, x = ctx.p, ctx.rec.x
    xn = _norm_lin(p.norm_on_input, stream, x)
    wo = p.head_w_o()
    vals = torch.stack([xn @ p.w_v[:, _kv_cols(p, h)] for h in range(p.n_heads)])  # [H, n, dh]
    W = torch.bmm(torch.bmm(ctx.alpha, vals), wo)  # (α v) W^O: n²·dh, not n²·d
    const = ctx.out_bias.to(x.dtype).clone()  # [n, d]: b^O (/ s_i through a norm after the attention)
    beta = p.norm_on_input.bias
    rowsum = ctx.alpha.sum(-1)  # [H, n]: 1 up to the model's softmax precision (each row's own sum is used)
    for h in range(p.n_heads):
        c = torch.zeros(p.head_dim, dtype=x.dtype)
        if beta is not None:
            c = c + beta @ p.w_v[:, _kv_cols(p, h)]
        if p.b_v is not None:
            c = c + p.b_v[_kv_cols(p, h)]
        const = const + rowsum[h][:, None] * (c @ wo[h])[None]
    return W, const


def _ff_forward(ctx, factors, u: torch.Tensor) -> torch.Tensor:
    """FF_lin(u) on N2-normed inputs u, per position, with the frozen factors (its transpose is
    :func:`normviz.attribution.adjoint.ff_adjoint`)."""
    p = ctx.p
    h = (u @ p.w_in) * factors[0]
    if p.ff_kind != "mlp":
        h = h + (u @ p.w_up) * factors[1]
    return h @ p.w_out


def _ff_constant(ctx, factors) -> torch.Tensor:
    """The FF block's constant [n, d]: ((β2 W_in + b_in) ⊙ θ [+ (β2 W_up + b_up) ⊙ c_up]) W_out + b_out."""
    p = ctx.p
    n, d = ctx.rec.x.shape
    beta = ctx.ln_attn.bias
    zero = torch.zeros(d, dtype=ctx.rec.x.dtype)

    def pre(w, b):
        out = (beta @ w) if beta is not None else zero @ w
        return out + b if b is not None else out

    h = pre(p.w_in, p.b_in) * factors[0]
    if p.ff_kind != "mlp":
        h = h + pre(p.w_up, p.b_up) * factors[1]
    out = h @ p.w_out
    return out + p.b_out if p.b_out is not None else out


def _head_readers(ctx, g_z: torch.Tensor) -> torch.Tensor:
    """R_h = N1ᵀ(α^hᵀ (g_z W^O_hᵀ) W^V_hᵀ) per head, [H, n, d]: the reader of each head of the layer."""
    p, x = ctx.p, ctx.rec.x
    P = torch.einsum("nd,hed->hne", g_z, p.head_w_o())  # g W^O_hᵀ, [H, n, dh]
    Q = torch.bmm(ctx.alpha.to(g_z.dtype).transpose(1, 2), P)
    R = torch.stack([Q[h] @ p.w_v[:, _kv_cols(p, h)].T for h in range(p.n_heads)])
    return torch.stack([norm_adjoint(p.norm_on_input, R[h], x) for h in range(p.n_heads)])


# ---------------------------------------------------------------- pruning (circuit-tracer's algorithm)
def _normalised(A: np.ndarray) -> np.ndarray:
    a = np.abs(A)
    s = a.sum(1, keepdims=True)
    return a / np.maximum(s, 1e-10)


def _influence(A: np.ndarray, w: np.ndarray) -> np.ndarray:
    """w (A + A² + …) = w A (I − A)⁻¹ for the acyclic (nilpotent) normalised adjacency A (rows = targets):
    one linear solve instead of circuit-tracer's power series (the same sum: A's powers vanish past the
    longest path)."""
    wa = w @ A
    return np.linalg.solve((np.eye(A.shape[0]) - A).T, wa)


def _threshold(scores: np.ndarray, fraction: float) -> float:
    s = np.sort(scores.ravel())[::-1]
    if s.sum() <= 0:
        return np.inf
    cum = np.cumsum(s) / s.sum()
    return float(s[min(int(np.searchsorted(cum, fraction)), len(s) - 1)])


def check_thresholds(node_threshold, edge_threshold) -> None:
    """Both pruning thresholds are numbers in [0, 1] (a bool is not a number: True is not 1.0)."""
    for name, t in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
        if isinstance(t, (bool, np.bool_)) or not (
            isinstance(t, (int, float, np.integer, np.floating)) and 0.0 <= t <= 1.0
        ):
            raise NormvizError(f"{name} must be a number in [0, 1], not {t!r}.")


GRAPH_MARGIN = 1.15  # the counted tensors gave 2.4 GB per 1,000 tokens where 2.6 were measured


def graph_bytes(n: int, n_layers: int, n_heads: int, d: int, d_ff: int, itemsize: int) -> int:
    """Bytes :func:`graph` holds beyond the session's records, known before it runs: every component's write
    and reader [C, n, d] (C = L·(H + 1)) and one more of that size for the edges' products, the FF blocks'
    frozen factors [L, 2, n, d_ff], and the N × N adjacency with pruning's copies of it (float64, 8 of them;
    N = n + C + 2), × :data:`GRAPH_MARGIN`. Measured on smollm2 (float32, issue 42): 3.8 GB at 1,024 tokens,
    6.4 GB at 2,048 (~2.6 GB per 1,000 tokens, records included); this gives 2.8 GB per 1,000."""
    C = n_layers * (n_heads + 1)
    N = n + C + 2
    return int(GRAPH_MARGIN * (int(itemsize) * n * (3 * C * d + 2 * n_layers * d_ff) + 8 * 8 * N * N))


def graph_fits(n: int, n_layers: int, n_heads: int, d: int, d_ff: int, itemsize: int, budget_mb: float) -> int:
    """The longest input whose :func:`graph_bytes` stays within ``budget_mb``."""
    return longest(lambda m: graph_bytes(m, n_layers, n_heads, d, d_ff, itemsize) <= budget_mb * 2**20, 1 << 30)


def too_costly(
    n: int, n_layers: int, n_heads: int, d: int, d_ff: int, itemsize: int, budget_mb: float | None
) -> TooCostlyError | None:
    """The refusal of a graph of ``n`` tokens over the memory budget (option ``memory_budget_mb``), or None."""
    if budget_mb is None:
        return None
    need = graph_bytes(n, n_layers, n_heads, d, d_ff, itemsize)
    if need <= budget_mb * 2**20:
        return None
    fits = graph_fits(n, n_layers, n_heads, d, d_ff, itemsize, budget_mb)
    return TooCostlyError(
        f"The attribution graph would hold about {memory.mb(need)} for {n} tokens, over the memory budget of "
        f"{memory.mb(int(budget_mb * 2**20))} (option memory_budget_mb; in the app NORMVIZ_MEMORY_BUDGET_MB). "
        f"Shorten the text to about {fits} tokens (--max-tokens), or raise the budget."
    )


def prune(A: np.ndarray, logit: int, always: np.ndarray, node_threshold: float, edge_threshold: float):
    """(node_mask, edge_mask, cumulative influence) as circuit-tracer's ``prune_graph`` with one logit target."""
    check_thresholds(node_threshold, edge_threshold)
    w = np.zeros(A.shape[0])
    w[logit] = 1.0
    influence = _influence(_normalised(A), w)
    node_mask = influence >= _threshold(influence, node_threshold)
    node_mask |= always
    pruned = A * node_mask[:, None] * node_mask[None, :]
    An = _normalised(pruned)
    edge_scores = An * (_influence(An, w) + w)[:, None]
    edge_mask = (edge_scores >= _threshold(edge_scores, edge_threshold)) & (pruned != 0)
    inner = ~always
    while True:  # components need an outgoing and an incoming edge; repeat until nothing changes
        before = node_mask.copy()
        edge_mask &= node_mask[:, None] & node_mask[None, :]
        node_mask[inner] &= edge_mask[:, inner].any(0) & edge_mask[inner].any(1)
        if (node_mask == before).all():
            break
    order = np.argsort(-influence)
    cum = np.zeros_like(influence)
    total = influence.sum()
    cum[order] = np.cumsum(influence[order]) / (total if total > 0 else 1.0)
    return node_mask, edge_mask, cum


# ---------------------------------------------------------------- the graph
@torch.no_grad()
def graph(
    session, token=None, foil=None, position: int = -1, node_threshold: float = 0.8, edge_threshold: float = 0.98
) -> Graph:
    """The exact attribution graph of ``token`` (None: the top prediction) minus ``foil`` at ``position``
    (module docstring), pruned at ``node_threshold`` / ``edge_threshold`` (circuit-tracer's defaults)."""
    from . import readout_of, target

    check_thresholds(node_threshold, edge_threshold)
    lm = session.lm
    require_row(lm, "graph")  # the raw-attention floor: needs an architecture row
    if lm.is_encoder_decoder:
        raise NotApplicableError("graph: encoder–decoder models are not supported yet (decoder-only pre-LN models).")
    readout = readout_of(lm)
    if lm.spec.placement != "pre" or not readout.linear:
        raise NotApplicableError(
            f"graph needs a pre-LN stack with a linear readout, where every component writes "
            f"into one residual stream read by the logit; {lm.name!r} normalises after each "
            "block (post-LN). Use explain().sources, which carries every token through every norm."
        )
    d, d_ff = lm.sizes
    refusal = too_costly(
        session.n_tokens,
        lm.n_layers,
        lm.n_heads,
        d,
        d_ff,
        accumulation_itemsize(lm.dtype),
        memory.budget_mb(session.options),
    )
    if refusal is not None:
        raise refusal
    t0 = time.perf_counter()
    lock = getattr(getattr(session, "store", None), "lock", None)
    if lock is not None:
        lock.acquire()
    try:
        views = session.layers()
        t = target(lm, readout, views, token, foil, position)
        out = _build(views, readout, t)
    finally:
        if lock is not None:
            lock.release()
    t1 = time.perf_counter()
    L, H = len(views), views[0].p.n_heads
    n = views[0].rec.x.shape[0]
    tokens = [token_text(lm.tokenizer, int(v)) for v in session.encoded.ids]  # decoded, as Neuronpedia shows them
    names = [f"{label} [{k}]" for k, label in enumerate(session.encoded.labels)]
    kinds, layers, heads = ["embedding"] * n, [-1] * n, [-1] * n
    for l in range(L):
        names += [f"L{l}.H{h}" for h in range(H)] + [f"L{l}.FF"]
        kinds += ["attention head"] * H + ["mlp"]
        layers += [l] * (H + 1)
        heads += list(range(H)) + [-1]
    names += [
        "biases",
        f"logit {token_text(lm.tokenizer, t.token)!r}"
        + (f" − {token_text(lm.tokenizer, t.foil)!r}" if t.foil is not None else ""),
    ]
    kinds += ["bias", "logit"]
    layers += [-1, L]
    heads += [-1, -1]
    A, values, positions = out
    always = np.zeros(len(names), dtype=bool)
    always[:n] = True
    always[-2:] = True
    node_mask, edge_mask, cum = prune(A, len(names) - 1, always, node_threshold, edge_threshold)
    probs = torch.softmax(readout.logits(views[-1].rec.final[t.i : t.i + 1]).to(torch.float64), -1)[0]
    return Graph(
        tokens=tokens,
        token_ids=[int(v) for v in session.encoded.ids],
        position=t.i,
        token=t.token,
        token_text=token_text(lm.tokenizer, t.token),
        foil=t.foil,
        foil_text=token_text(lm.tokenizer, t.foil) if t.foil is not None else None,
        total=t.total,
        prob=float(probs[t.token]),
        kinds=kinds,
        names=names,
        layers=np.array(layers),
        heads=np.array(heads),
        positions=positions,
        values=values,
        adjacency=A,
        influence=cum,
        node_mask=node_mask,
        edge_mask=edge_mask,
        node_threshold=node_threshold,
        edge_threshold=edge_threshold,
        model=lm.name,
        prompt=getattr(session, "text", "") or "",
        seconds={"build": t1 - t0, "prune": time.perf_counter() - t1},
    )


def accumulation_itemsize(dtype) -> int:
    """Bytes per number of :func:`_build`'s accumulation: float64 models 8, every other model float32's 4."""
    return 8 if dtype == torch.float64 else 4


def _build(views, readout, t):
    """(adjacency [N, N] as [target, source], node values [N], node positions [N]); accumulated in the records'
    working dtype (float64 models: float64; others float32: the writes are C·n·d numbers)."""
    acc = torch.float64 if views[0].rec.x.dtype == torch.float64 else torch.float32
    L, H = len(views), views[0].p.n_heads
    x0 = views[0].rec.x.to(acc)
    n, d = x0.shape
    C = L * (H + 1)
    N = n + C + 2
    bias_node, logit = n + C, n + C + 1
    A = np.zeros((N, N))
    values = np.zeros(N)
    positions = np.zeros(N, dtype=np.int64)
    positions[:n] = np.arange(n)
    positions[n:] = t.i

    # forward: every component's linear write W_c [n, d] of the frozen network's own stream (so that every
    # identity is exact), and the stream of constants at each point
    writes = torch.zeros(C, n, d, dtype=acc)
    readers = torch.zeros(C, n, d, dtype=acc)
    consts_at_x, consts_at_z, factors_of = [], [], []
    const = torch.zeros(n, d, dtype=acc)
    stream = x0.clone()
    from ..methods.decompx import ff_factors

    parallel = bool(views[0].p.parallel)
    for l, ctx in enumerate(views):
        c64 = _Upcast(ctx, acc)
        consts_at_x.append(const.clone())
        stream_x, const_x = stream, const
        W, attn_const = _head_writes(c64, stream)
        writes[l * (H + 1) : l * (H + 1) + H] = W
        const = const + attn_const
        stream = stream + W.sum(0) + attn_const
        # the FF reads z = x + Attn, or a parallel block's layer input x
        consts_at_z.append(const_x.clone() if parallel else const.clone())
        factors = [f.to(acc) for f in ff_factors(ctx, ctx.ln_attn.apply(ctx.ff_z))]
        factors_of.append(factors)
        w_ff = _ff_forward(c64, factors, _norm_lin(c64.ln_attn, stream_x if parallel else stream, c64.ff_z))
        writes[l * (H + 1) + H] = w_ff
        ff_const = _ff_constant(c64, factors)
        const = const + ff_const
        stream = stream + w_ff + ff_const
        ctx.clear()

    r = readout.vector(t.u.to(acc), t.x_last.to(acc))
    # the logit's incoming edges: direct parts ⟨r, W_s[i]⟩
    A[logit, n : n + C] = (writes[:, t.i] @ r).numpy()
    A[logit, t.i] = float(x0[t.i] @ r)
    A[logit, bias_node] = float(const[t.i] @ r) + readout.constant(t.u.to(acc), t.b)

    # backward: adjoints, readers, edges
    g = torch.zeros(n, d, dtype=acc)
    g[t.i] = r
    for l in reversed(range(L)):
        ctx = views[l]
        c64 = _Upcast(ctx, acc)
        base = n + l * (H + 1)
        ff_node = base + H
        # FF l: its value with the adjoint after it, its reader at z
        by_pos = torch.einsum("nd,nd->n", g, writes[l * (H + 1) + H])
        values[ff_node] = float(by_pos.sum())
        positions[ff_node] = int(by_pos.abs().argmax())
        R_ff = norm_adjoint(c64.ln_attn, ff_adjoint(c64.p, g, factors_of[l])[0], c64.ff_z)
        readers[l * (H + 1) + H] = R_ff
        A[ff_node, bias_node] = float((R_ff * consts_at_z[l]).sum())
        g_out = g  # a parallel block's heads write where the FF writes: after it, not into its input
        g = g + R_ff
        # heads of layer l read x^l, write into z (adjoint g there)
        g_heads = g_out if parallel else g
        contrib = torch.einsum("nd,hnd->hn", g_heads, writes[l * (H + 1) : l * (H + 1) + H])  # [H, n]
        values[base : base + H] = contrib.sum(1).numpy()
        positions[base : base + H] = contrib.abs().argmax(-1).numpy()
        R = _head_readers(c64, g_heads)
        readers[l * (H + 1) : l * (H + 1) + H] = R
        A[base : base + H, bias_node] = (R * consts_at_x[l][None]).sum((1, 2)).numpy()
        g = g + R.sum(0)
        ctx.clear()
    # every edge at once: tokens ⟨R_c[t], x⁰_t⟩; components ⟨R_c, W_s⟩ for s written before c reads
    A[n : n + C, :n] = torch.einsum("cnd,nd->cn", readers, x0).numpy()
    inner = (readers.reshape(C, -1) @ writes.reshape(C, -1).T).numpy()
    layer_of = np.repeat(np.arange(L), H + 1)
    is_ff = np.tile(np.r_[np.zeros(H, bool), True], L)
    before = (layer_of[None, :] < layer_of[:, None]) | (
        (layer_of[None, :] == layer_of[:, None]) & is_ff[:, None] & ~is_ff[None, :] & (not parallel)
    )
    A[n : n + C, n : n + C] = np.where(before, inner, 0.0)
    values[:n] = (g * x0).sum(-1).numpy()  # the tokens' total effects: sources
    values[bias_node] = A[:, bias_node].sum()
    values[logit] = A[logit].sum()
    return A, values, positions


class _Upcast:
    """A layer view with its record, α and parameters in the graph's accumulation dtype."""

    def __init__(self, ctx, dtype):
        from ..models.params import upcast_params

        self.p = ctx.p if ctx.p.w_o.dtype == dtype else upcast_params(ctx.p, dtype)
        self.rec = ctx.rec if ctx.rec.x.dtype == dtype else ctx.rec.to(ctx.rec.x.device, dtype)
        self.alpha = ctx.mix_alpha.to(dtype)  # α, or α/s_i where a norm P_a follows the attention
        self.out_bias = ctx.out_bias().to(dtype)
        self.ln_attn = self.p.norm_on_attn_residual
        self.ff_z = self.rec.x if self.p.parallel else self.rec.z_attn


__all__ = ["SCHEMA", "Graph", "check_thresholds", "graph", "graph_bytes", "graph_suffix", "prune", "too_costly"]
