"""Edge faithfulness curves (MIB's CPR on edges, Mueller et al. 2025): keep a method's top-k edges, mean-ablate the
rest, the share of the logit difference recovered against k.

    edge_forward(lm, ids, ablate, means)   [B] scores token − foil (or the logits) with each of B edge sets ablated
    edge_list(lm)                          every edge from a head to a node that reads the residual after it
    edge_curve(bench, order, means, ks)    [E, len(ks)] logit differences keeping the top k edges of ``order``

An edge runs from a head u = (l, h) (the sender) to a receiver v that reads the residual stream after u writes:
a later head (through its own norm and q, k, v), an FF block of u's layer or a later one, or the logits (through
the final norm) — the graph :mod:`normviz.attribution.eap` scores. Ablating u → v replaces, in v's private copy of
the residual only, u's write W^O_u o_u (o_u its output before W^O in this same run) by W^O_u o'_u (o'_u its mean
over the benchmark's examples): x_v = r − Σ_{u → v ablated} W^O_u (o_u − o'_u), r the residual every sender wrote
into. Every other node reads r. Ablating every edge out of u is mean-ablating u; ablating none is the model's own
forward pass (the tests). One batched pass per example computes all the edge sets of a curve.

Llama-style decoders only (a pre-norm block, a head's write W^O o_u straight into the residual, RoPE, no q/k
norm: Llama, Mistral, Qwen2); the attention is recomputed here per receiver head (each head reads its own copy of
the residual), the same arithmetic as transformers' eager attention.
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.errors import NotApplicableError

SUPPORTED = ("llama", "mistral", "qwen2")


def _check(lm) -> None:
    kind = getattr(lm.model.config, "model_type", "")
    if kind not in SUPPORTED:
        raise NotApplicableError(f"edge curves need a Llama-style decoder ({', '.join(SUPPORTED)}); {kind!r} is not")


def not_scorable(lm) -> str | None:
    """Why ``lm``'s edges cannot be scored by :func:`edge_forward` (None: they can), without running anything."""
    try:
        _check(lm)
    except NotApplicableError as exc:
        return str(exc)
    model = getattr(lm, "head_model", None)
    if model is None or not hasattr(model, "lm_head"):
        return f"{lm.name!r} has no language-model head: edge curves score a prediction"
    return None


def edge_list(lm) -> list[tuple]:
    """Every edge as (sender (l, h), receiver): ("head", l', h') with l' > l, ("ff", l') with l' ≥ l, ("logits",)."""
    L, H = lm.n_layers, lm.n_heads
    out: list[tuple] = []
    for l in range(L):
        for h in range(H):
            out += [((l, h), ("head", m, g)) for m in range(l + 1, L) for g in range(H)]
            out += [((l, h), ("ff", m)) for m in range(l, L)]
            out.append(((l, h), ("logits",)))
    return out


def masks(lm, sets: list[list[tuple]]):
    """(heads [B, L, H, L, H], ff [B, L, H, L], logits [B, L, H]) 0/1: the edges each set ablates."""
    L, H, B = lm.n_layers, lm.n_heads, len(sets)
    heads, ff, logits = np.zeros((B, L, H, L, H)), np.zeros((B, L, H, L)), np.zeros((B, L, H))
    for b, edges in enumerate(sets):
        for (l, h), v in edges:
            if v[0] == "head":
                heads[b, l, h, v[1], v[2]] = 1
            elif v[0] == "ff":
                ff[b, l, h, v[1]] = 1
            else:
                logits[b, l, h] = 1
    return heads, ff, logits


def _rope(x, cos, sin):
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), -1)
    return x * cos + rot * sin


@torch.no_grad()
def edge_forward(lm, ids, sets: list[list[tuple]], means, token=None, foil=None) -> torch.Tensor:
    """[B] the score (logit of ``token`` − logit of ``foil``) at the last position with each edge set ablated
    (mean ablation: ``means`` [L, H, d_head]); ``token`` None: [B, vocab] logits."""
    _check(lm)
    model = getattr(lm, "head_model", None)
    if model is None or not hasattr(model, "lm_head"):
        raise NotApplicableError(f"{lm.name!r} has no language-model head: edge curves score a prediction")
    inner = model.model
    dev = next(model.parameters()).device
    dt = next(model.parameters()).dtype
    L, H = lm.n_layers, lm.n_heads
    B, n = len(sets), len(ids)
    a_heads, a_ff, a_logits = (torch.as_tensor(x, dtype=dt, device=dev) for x in masks(lm, sets))
    mean = torch.as_tensor(np.asarray(means), dtype=dt, device=dev)  # [L, H, dh]
    x = inner.embed_tokens(torch.tensor([ids], device=dev)).expand(B, n, -1)
    pos = torch.arange(n, device=dev)[None]
    cos, sin = inner.rotary_emb(x, pos)  # [1, n, dh]
    cos, sin = cos[:, None], sin[:, None]
    causal = torch.full((n, n), float("-inf"), dtype=dt, device=dev).triu(1)
    d = x.shape[-1]
    delta = torch.zeros((B, L, H, n, d), dtype=dt, device=dev)  # W^O_u (o_u − o'_u) of every sender so far
    r = x.clone()
    for l, layer in enumerate(inner.layers):
        attn = layer.self_attn
        dh = attn.head_dim
        groups = H // (attn.k_proj.out_features // dh)
        own = r[:, None] - torch.einsum("bukh,buknd->bhnd", a_heads[:, :l, :, l], delta[:, :l])  # earlier senders
        xn = layer.input_layernorm(own)  # [B, H, n, d]: each receiver head's own input
        q = attn.q_proj(xn).view(B, H, n, H, dh)
        k = attn.k_proj(xn).view(B, H, n, -1, dh)
        v = attn.v_proj(xn).view(B, H, n, -1, dh)
        idx = torch.arange(H, device=dev)
        q, k, v = q[:, idx, :, idx], k[:, idx, :, idx // groups], v[:, idx, :, idx // groups]  # [H, B, n, dh]
        q, k = _rope(q, cos, sin), _rope(k, cos, sin)
        w = torch.matmul(q, k.transpose(-1, -2)) * attn.scaling + causal
        w = torch.softmax(w, -1, dtype=torch.float32).to(dt)
        o = torch.matmul(w, v).permute(1, 0, 2, 3)  # [B, H, n, dh]
        wo = attn.o_proj.weight.view(d, H, dh)
        write = torch.einsum("bhnk,dhk->bhnd", o, wo)
        delta[:, l] = write - torch.einsum("hk,dhk->hd", mean[l], wo)[None, :, None]
        r = r + write.sum(1)
        if attn.o_proj.bias is not None:
            r = r + attn.o_proj.bias
        own = r - torch.einsum("buk,buknd->bnd", a_ff[:, : l + 1, :, l], delta[:, : l + 1])
        r = r + layer.mlp(layer.post_attention_layernorm(own))
    own = r[:, -1] - torch.einsum("buk,bukd->bd", a_logits, delta[:, :, :, -1])
    logits = model.lm_head(inner.norm(own))
    if token is None:
        return logits
    return logits[:, token] - (0 if foil is None else logits[:, foil])


def ranked(scores: dict[str, np.ndarray], edges: list[tuple]) -> list[tuple]:
    """The edges by mean |score| over examples, highest first (ties: list order). ``scores``: EdgeScores-shaped
    arrays per example stacked: {"heads": [E, L, H, L, H], "ff": [E, L, H, L], "logits": [E, L, H]}."""
    mean = {k: np.abs(np.asarray(v)).mean(0) for k, v in scores.items()}

    def value(e):
        (l, h), v = e
        if v[0] == "head":
            return mean["heads"][l, h, v[1], v[2]]
        if v[0] == "ff":
            return mean["ff"][l, h, v[1]]
        return mean["logits"][l, h]

    vals = [float(np.nan_to_num(value(e), nan=-1.0)) for e in edges]
    order = sorted(range(len(edges)), key=lambda i: (-vals[i], i))
    return [edges[i] for i in order]


def edge_curve(lm, examples, order: list[tuple], means, ks: list[int]) -> np.ndarray:
    """[E, len(ks)] the logit difference of each example keeping the top k edges of ``order`` (the rest
    mean-ablated), for each k of ``ks`` (k = len(order): nothing ablated)."""
    sets = [order[k:] for k in ks]
    out = np.empty((len(examples), len(ks)))
    for e, (ids, token, foil) in enumerate(examples):
        out[e] = edge_forward(lm, ids, sets, means, token, foil).to(torch.float64).cpu().numpy()
    return out


# ---------------------------------------------------------------- the methods' edge rankings, scored
EDGE_CURVE_METHODS = ("eap", "eap-ig", "graph")


def graph_edges(lm, g) -> dict[str, np.ndarray]:
    """The exact attribution graph's edges out of each head (its direct effect through the receiver, all frozen
    at the real pass: :mod:`normviz.attribution.graph`), in EdgeScores' layout: heads [L, H, L, H], ff [L, H, L],
    logits [L, H] (nan where no edge)."""
    L, H = lm.n_layers, lm.n_heads
    heads, ff, logits = np.full((L, H, L, H), np.nan), np.full((L, H, L), np.nan), np.full((L, H), np.nan)
    index, mlp, logit = {}, {}, None
    for k, kind in enumerate(g.kinds):
        if kind == "attention head":
            index[(int(g.layers[k]), int(g.heads[k]))] = k
        elif kind == "mlp":
            mlp[int(g.layers[k])] = k
        elif kind == "logit":
            logit = k
    A = g.adjacency  # [target, source]
    for (l, h), s in index.items():
        for (m, q), t in index.items():
            if m > l:
                heads[l, h, m, q] = A[t, s]
        for m, t in mlp.items():
            if m >= l:
                ff[l, h, m] = A[t, s]
        if logit is not None:
            logits[l, h] = A[logit, s]
    return {"heads": heads, "ff": ff, "logits": logits}


def method_edges(bench, methods=EDGE_CURVE_METHODS, steps: int = 16):
    """({method: {"heads": [E, …], "ff": [E, …], "logits": [E, …]}}, {method: seconds per example})."""
    import time

    from ..attribution.eap import edges as eap_edges
    from ..attribution.graph import graph
    from .circuit_scores import _session

    lm = bench.lm
    out: dict[str, dict[str, list]] = {m: {"heads": [], "ff": [], "logits": []} for m in methods}
    seconds = {m: 0.0 for m in methods}
    for ids, token, foil in bench.examples:
        s = _session(lm, ids)
        for m in methods:
            t0 = time.perf_counter()
            if m == "graph":
                got = graph_edges(lm, graph(s, token, foil))
            else:
                e = eap_edges(s, token, foil, steps=steps if m == "eap-ig" else None)
                got = {"heads": e.heads, "ff": e.ff, "logits": e.logits}
            seconds[m] += time.perf_counter() - t0
            for k in got:
                out[m][k].append(got[k])
    E = max(1, len(bench.examples))
    return {m: {k: np.stack(v) for k, v in d.items()} for m, d in out.items()}, {m: t / E for m, t in seconds.items()}


def evaluate_edges(bench, methods=EDGE_CURVE_METHODS, resamples: int = 1000, seed: int = 0, points: int = 33):
    """Per method: its edges ranked by mean |score|, the curve (keep the top k, mean-ablate the rest; k at
    ``points`` evenly spaced values of 0 … #edges, or every k when fewer), its area with a 95 % bootstrap interval
    over examples, the head-to-head edge AUROC where the benchmark has edges, seconds per example. Returns a dict
    (JSON-ready)."""
    from ..attribution.knockout import head_means_of
    from ..circuits import encoded
    from .circuit_scores import _interval, area, auroc, curve_ks, recovered

    lm = bench.lm
    edges = edge_list(lm)
    means = head_means_of(lm, [encoded(lm, ids) for ids, _, _ in bench.examples])
    ks = curve_ks(len(edges), points)
    x = np.asarray(ks, dtype=np.float64) / len(edges)
    scores, seconds = method_edges(bench, methods)
    truth = None
    if bench.edges:
        L, H = lm.n_layers, lm.n_heads
        truth = np.zeros((L, H, L, H), dtype=bool)
        for (a, b), (c, d) in bench.edges:
            truth[a, b, c, d] = True
    draws = np.random.default_rng(seed).integers(0, len(bench.examples), (resamples, len(bench.examples)))
    rows = []
    for m in methods:
        order = ranked(scores[m], edges)
        f = edge_curve(lm, bench.examples, order, means, ks)
        share = recovered(f)
        boot = [area(recovered(f[d]), x) for d in draws]
        row = {
            "method": m,
            "area": area(share, x),
            **dict(zip(("area_lo", "area_hi"), _interval(boot))),
            "seconds": seconds[m],
            "share": share.tolist(),
            "top": [[list(u), list(v)] for u, v in order[:10]],
        }
        if truth is not None:
            mean = np.abs(scores[m]["heads"]).mean(0)
            ok = np.isfinite(mean)
            row["edge_auroc"] = auroc(mean[ok], truth[ok])
        rows.append(row)
    return {
        "benchmark": bench.name,
        "edges": len(edges),
        "ks": ks,
        "total": float(f[:, -1].mean()),
        "ablated_all": float(f[:, 0].mean()),
        "examples": len(bench.examples),
        "methods": rows,
    }
