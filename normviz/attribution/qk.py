"""Why a head attends where it does: its pre-softmax score split exactly over what wrote the residual stream.

For head h of layer l, query position i and key position j the score (before the mask and the softmax) is

    s_ij = c · ⟨q_i, k_j⟩,   q_i = R_i(W_Q N(x_i) + b_Q),   k_j = R_j(W_K N(x_j) + b_K)

with c the attention call's scaling (1/√d_head), R_i the position encoding at i (RoPE: a rotation, linear;
the identity for GPT-2) and N the layer's input norm. With N's real scale s_i frozen at the recorded pass, N is
affine: N(x_i) = γ⊙C(x_i)/s_i + β (C centres for LayerNorm, the identity for RMSNorm). The residual stream is a
sum of what wrote it, x_i = Σ_a x_i(a), so

    q_i = Σ_a q_i(a) + q_i(∅),   q_i(a) = R_i(W_Q γ⊙C(x_i(a))/s_i),   q_i(∅) = R_i(W_Q β + b_Q)

and likewise k_j; hence, exactly, s_ij = Σ_a Σ_b c·⟨q_i(a), k_j(b)⟩ over a, b in the components and ∅.

Two splittings of x^l (pre-LN self-attention stacks):
- by component: the embedding output x^0, and for each earlier layer its heads' writes Σ_j α^h_ij f^h(x̂_j),
  its b^O and its FF block's output (biases included), as the direct parts of :mod:`normviz.attribution.direct`;
- by source token: every input token's part of x^l and the bias part, carried exactly through the earlier
  layers (the propagation of ``explain().sources``, :mod:`normviz.attribution.propagate`); this layer's own
  β, b_Q and b_K join the bias part.

q_i(a) and k_j(b) are computed by the model's own layer code (its q/k projections, fused layouts, GQA, RoPE),
run on a batch of component states with the input norm replaced, in this thread only, by its frozen affine
map, and stopped at the attention call (:func:`normviz.record.attention_capture.rerun`). The total is therefore the
score of the exactly normed states; the model's own norm may round differently (Llama's RMSNorm computes in
float32 even in a float64 model: ~1e-7), which ``model_score`` shows beside it.
"""

from __future__ import annotations

import copy
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np
import torch

from ..core import memory
from ..core.errors import NormvizError, NotApplicableError, TooCostlyError
from ..models.params import _norm_params, get_path
from ..record import inline_qk
from ..record.attention_capture import rerun
from ..record.recorder import owner_only
from .predict import position_index

CHUNK_ROWS = 64  # component states per batched layer call (fewer for a long input: CHUNK_BYTES)
MARGIN = 1.25  # attend_bytes over the counted tensors: the layer call's own temporaries, allocator slack
CHUNK_BYTES = 128 << 20  # a batched layer call's working set is kept near this (at n = 1024 on smollm2, 64 rows
# of states with their normed copy, q, k, v and RoPE's temporaries were ~0.9 GB)


@dataclass
class Attend:
    """One head's score s_ij split exactly (see the module docstring).

    total           s_ij = c·⟨q_i, k_j⟩ from the exactly normed states (= by_component.sum() = by_token_full.sum())
    model_score     the same score from the model's own q and k (its own norm's rounding)
    components      names of the components, the constant ∅ ("constant": β, b_Q / b_K through R) last
    by_component    [C, C]: rows = what wrote the query's state x_i, columns = what wrote the key's state x_j
    tokens          the input tokens' readable labels
    by_token_full   [n+1, n+1]: rows = source tokens of x_i, columns = of x_j; the last row/column the biases
                    (propagated bias part, β, b_Q / b_K); None unless asked for
    """

    layer: int
    head: int
    query: int
    key: int
    total: float
    model_score: float
    scaling: float
    components: list[str]
    by_component: np.ndarray
    tokens: list[str]
    by_token_full: np.ndarray | None = None

    @property
    def by_token(self) -> np.ndarray | None:
        """[n, n]: query-side source token × key-side source token (biases in :attr:`by_token_full`)."""
        return None if self.by_token_full is None else self.by_token_full[:-1, :-1]

    def grouped(self, by: str = "block") -> tuple[list[str], np.ndarray]:
        """(labels, [G, G]): :attr:`by_component` summed into readable groups, the embedding, each earlier
        layer's attention (its heads and b^O) and its FF block (``by="layer"``: the whole layer), and the
        constant; sums to :attr:`total`."""
        if by not in ("block", "layer"):
            raise NormvizError(f'grouped(by={by!r}): "block" or "layer".')
        labels, index = [], []
        for name in self.components:
            group = (
                name
                if name in ("embedding", "constant")
                else name.split(".")[0]
                if by == "layer"
                else (name.split(".")[0] + (" FF" if name.endswith(".FF") else " attention"))
            )
            if group not in labels:
                labels.append(group)
            index.append(labels.index(group))
        m = np.zeros((len(labels), len(labels)))
        np.add.at(m, (np.array(index)[:, None], np.array(index)[None, :]), self.by_component)
        return labels, m

    def top_pairs(self, k: int = 10, by: str = "component") -> list[tuple[str, str, float]]:
        """The k largest |parts| as (query side, key side, value), largest first (``by``: "component" or
        "token")."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise NormvizError(f"top_pairs(k={k!r}): k must be a whole number, 1 or more.")
        if by not in ("component", "token"):
            raise NormvizError(f'top_pairs(by={by!r}): "component" or "token".')
        if by == "component":
            m, rows, cols = self.by_component, self.components, self.components
        else:
            if self.by_token_full is None:
                raise NormvizError("this Attend was built without by_token: call attend(..., by_token=True).")
            names = [f"{t} [{i}]" for i, t in enumerate(self.tokens)] + ["biases"]
            m, rows, cols = self.by_token_full, names, names
        order = np.argsort(-np.abs(m), axis=None)[:k]
        return [(rows[a], cols[b], float(m[a, b])) for a, b in zip(*np.unravel_index(order, m.shape))]


def _scaling(inputs, head_dim: int) -> float:
    """c: the attention call's ``scaling``, the module's, or GPT-2's rule (1/√d_head, over layer_idx+1 when
    scale_attn_by_inverse_layer_idx)."""
    kw, mod = inputs.kwargs, inputs.module
    if kw.get("scaling") is not None:
        return float(kw["scaling"])
    if getattr(mod, "scaling", None) is not None:
        return float(mod.scaling)
    c = head_dim**-0.5 if getattr(mod, "scale_attn_weights", True) else 1.0
    if getattr(mod, "scale_attn_by_inverse_layer_idx", False):
        c /= float(mod.layer_idx + 1)
    return c


def _refuse_call(lm, call) -> None:
    """Refuse where the layer's recorded call passes a tensor the row names in ``attend_refuse_call`` (a term of
    the score outside q·k: Falcon-RW's ALiBi)."""
    kwargs = call[1] if call is not None else {}
    for name, why in lm.spec.attend_refuse_call:
        if isinstance(kwargs.get(name), torch.Tensor):
            raise NotApplicableError(
                f"attend: {lm.name!r} ({lm.model_type}): {why}; the maps, explain, sources, graph and interventions "
                "are exact for it."
            )


def _refuse_unsupported(lm, layer_module) -> None:
    if lm.spec.placement != "pre":
        raise NotApplicableError(
            f"attend needs a pre-LN stack, where each layer's input norm is the only thing between the residual "
            f"stream and q, k; {lm.name!r} normalises after each block (post-LN)."
        )
    named = set(lm.spec.qk_norms or ())
    for name, _ in layer_module.named_modules():
        if name.endswith(("q_norm", "k_norm", "q_layernorm", "k_layernorm")) and name not in named:
            raise NotApplicableError(
                f"attend: {lm.name!r} normalises q and k ({name}) and its architecture row names no QK-norm "
                "(ArchSpec.qk_norms), so the score is not bilinear in the residual stream's parts here."
            )


class _FrozenQK:
    """A QK-norm (q or k normalised inside the attention) replaced, in this thread, by its linear part with the
    real scale of the recorded pass: y = γ⊙h / s(h_real) (per token, and per head where the norm is per head).
    With it, q and k are linear in the layer's input, so the score stays bilinear in the residual's parts."""

    def __init__(self, norm):
        self.norm, self.scale = norm, None

    def capture(self, module, args):
        self.scale = self.norm.scale(args[0])  # the real input, [1, n, …]

    def __call__(self, module, args, output):
        y = self.norm.linear_part(args[0]) / self.scale[..., None]
        return y.to(output.dtype)


class _FrozenNorm:
    """The layer's input norm replaced, in this thread, by its affine map with the real scale s of the recorded
    input: y = γ⊙C(h)/s + w·β per batch row (w = ``beta_rows``)."""

    def __init__(self, norm, scale: torch.Tensor):
        self.norm, self.scale, self.beta_rows = norm, scale, None

    def __call__(self, module, args, output):
        h = args[0]
        y = self.norm.linear_part(h) / self.scale[None, :, None]
        if self.norm.bias is not None and self.beta_rows is not None:
            y = y + self.beta_rows.to(y.dtype)[:, None, None] * self.norm.bias
        return y.to(output.dtype).contiguous()


def _lock(session):
    return getattr(getattr(session, "store", None), "lock", None) or nullcontext()


def _runner(lm, p):
    """(layer, x, call) → the layer's attention inputs (q, k …) on x: stopped at its call through transformers'
    attention interface, or for a row whose attention runs inline, at its fused projection
    (:mod:`normviz.record.inline_qk`)."""
    if lm.spec.attention_call == "inline":
        return lambda layer, x, call: inline_qk.rerun(layer, x, call, lm.spec, p)
    return rerun


def _qk_rows(run, layer_module, frozen: _FrozenNorm, states: torch.Tensor, call, beta_rows: torch.Tensor):
    """(q [B, H, n, dh], k [B, KV, n, dh]) of the layer on the batch ``states`` [B, n, d] through the frozen norm."""
    frozen.beta_rows = beta_rows
    got = run(layer_module, states, call)
    if got is None:
        raise NotApplicableError("attend: this layer makes no call through transformers' attention interface.")
    return got.query, got.key


def _split(run, layer_module, frozen, states: torch.Tensor, call, i: int, j: int):
    """q_i(a) [C, H, dh] and k_j(a) [C, KV, dh] for the C component states [C, n, d] (linear parts), and the
    constant q_i(∅), k_j(∅): rows of zeros without β give R(b) (subtracted), with β the constant."""
    n, d = states.shape[1:]
    zeros = torch.zeros(2, n, d, dtype=states.dtype, device=states.device)
    q0, k0 = _qk_rows(run, layer_module, frozen, zeros, _call(call), torch.tensor([0.0, 1.0]))
    base_q, base_k = q0[0, :, i], k0[0, :, j]
    qs, ks = [], []
    rows = chunk_rows(n, d, states.element_size())
    for a in range(0, states.shape[0], rows):
        block = states[a : a + rows]
        q, k = _qk_rows(run, layer_module, frozen, block, _call(call), torch.zeros(block.shape[0]))
        qs.append(q[:, :, i] - base_q)
        ks.append(k[:, :, j] - base_k)
    return torch.cat(qs), torch.cat(ks), q0[1, :, i], k0[1, :, j]


def _call(call):
    return call if call is not None else ((), {})


def chunk_rows(n: int, d: int, itemsize: int) -> int:
    """Component states per batched layer call: :data:`CHUNK_ROWS`, fewer where that would pass
    :data:`CHUNK_BYTES` (a row's working set taken as 8·n·d values: the state, its normed copy, q, k, v and
    the position encoding's temporaries)."""
    return int(max(1, min(CHUNK_ROWS, CHUNK_BYTES // max(1, 8 * n * d * itemsize))))


def attend_bytes(n: int, d: int, n_heads: int, layer: int, by_token: bool, itemsize: int) -> int:
    """Bytes :func:`attend` holds beyond the session's records, known before it runs: the layer's component
    states [1 + layer·(H + 2), n, d], one batched layer call (:func:`chunk_rows`), α and head vectors of one
    earlier layer and their product, all × :data:`MARGIN`; ``by_token``: the source tokens' parts [n + 1, n, d],
    carried through the earlier layers (the propagation's buffer, its temporaries and the copy handed back: 4 of
    them)."""
    comps = 1 + layer * (n_heads + 2)
    rows = chunk_rows(n, d, itemsize)
    size = comps * n * d + 8 * rows * n * d + 4 * n_heads * n * (n + d)
    if by_token:
        size += 4 * (n + 1) * n * d + 8 * rows * n * d
    return int(MARGIN * size * int(itemsize))


def _check_memory(session, layer: int, by_token: bool, itemsize: int) -> None:
    """Refuse (TooCostlyError) before anything runs when :func:`attend_bytes` passes the memory budget
    (option ``memory_budget_mb``, the one ``Session.get`` is held to)."""
    budget = memory.budget_mb(session.options)
    if budget is None:
        return
    lm = session.lm
    n, (d, _) = session.n_tokens, lm.sizes
    need = attend_bytes(n, d, lm.n_heads, layer, by_token, itemsize)
    if need <= budget * 2**20:
        return
    fits = 4
    while fits < n and attend_bytes(fits * 2, d, lm.n_heads, layer, by_token, itemsize) <= budget * 2**20:
        fits *= 2
    what = "split by source token (by_token)" if by_token else "split"
    alt = (
        " Without by_token it needs " + memory.mb(attend_bytes(n, d, lm.n_heads, layer, False, itemsize)) + "."
        if by_token
        else ""
    )
    raise TooCostlyError(
        f"attend: layer {layer}'s score {what} would hold about {memory.mb(need)} for {n} tokens, over the memory "
        f"budget of {memory.mb(int(budget * 2**20))} (option memory_budget_mb; in the app "
        f"NORMVIZ_MEMORY_BUDGET_MB). Shorten the text (about {fits} tokens fit) or pick an earlier layer.{alt}"
    )


def _working_layer(layer_module, call, dtype: torch.dtype):
    """(layer, call) computing in ``dtype``, the records' working dtype: the model's own layer, or for a
    half-precision model a float32 copy of that one layer (its weights upcast, no hooks) with the call's
    floating tensors (RoPE's cos and sin, the mask) upcast, so that the states and the weights agree."""
    params = list(layer_module.parameters())
    if not params or all(p.dtype == dtype for p in params if p.is_floating_point()):
        return layer_module, call
    twin = copy.deepcopy(layer_module).to(dtype)
    for m in twin.modules():
        m._forward_hooks.clear()
        m._forward_pre_hooks.clear()

    def up(v):
        if isinstance(v, torch.Tensor):
            return v.to(dtype) if v.is_floating_point() else v
        if isinstance(v, (tuple, list)):
            return type(v)(up(x) for x in v)
        if isinstance(v, dict):
            return {k: up(x) for k, x in v.items()}
        return v

    if call is not None:
        call = (up(call[0]), up(call[1]))
    return twin, call


def components(views, layer: int) -> tuple[list[str], torch.Tensor]:
    """(names, x^l's components [C, n, d]): the embedding output, then per earlier layer its heads' writes
    Σ_j α^h_ij f^h(x̂_j), its b^O, its FF block's output (x^{l'+1} − z_attn). They sum to x^l (the layer's input)."""
    first = views[0].rec.x
    H = views[0].p.n_heads
    # written into one buffer (a list of parts and their concatenation held both: twice C·n·d at the peak)
    out = torch.empty(1 + layer * (H + 2), *first.shape, dtype=first.dtype, device=first.device)
    out[0] = first
    names, row = ["embedding"], 1
    for ctx in views[:layer]:
        out[row : row + H] = torch.bmm(ctx.mix_alpha.to(ctx.head_vectors.dtype), ctx.head_vectors)
        out[row + H] = ctx.out_bias().to(first.dtype).expand_as(first)
        out[row + H + 1] = ctx.rec.out - ctx.rec.z_attn
        row += H + 2
        names += [f"L{ctx.index}.H{h}" for h in range(H)] + [f"L{ctx.index}.attn bias", f"L{ctx.index}.FF"]
        ctx.clear()
    return names, out


def token_parts(views, layer: int) -> torch.Tensor:
    """Every source token's part of x^l and the bias part, [n+1, n, d] (source first), by the exact propagation."""
    from ..methods import decompx

    x0 = views[0].rec.x
    n, d = x0.shape
    X = torch.zeros(n, n + 1, d, dtype=x0.dtype, device=x0.device)
    X[torch.arange(n), torch.arange(n)] = x0
    for X in decompx.decompx_vectors(views[:layer], rules=decompx.BIAS_PART):
        pass
    return X.permute(1, 0, 2).clone()


def _bilinear(q: torch.Tensor, k: torch.Tensor, head: int, n_heads: int, c: float) -> torch.Tensor:
    """[A, B]: c·⟨q_a, k_b⟩ of head ``head`` (GQA: its key head h // (H / KV))."""
    kv = head // (n_heads // k.shape[1])
    return c * (q[:, head].to(torch.float64) @ k[:, kv].to(torch.float64).T)


@torch.no_grad()
def attend(session, layer: int, head: int, query: int = -1, key: int = 0, by_token: bool = False) -> Attend:
    """Split head ``head`` of layer ``layer``'s score of ``query`` → ``key`` exactly (module docstring)."""
    lm = session.lm
    L, H = lm.n_layers, lm.n_heads
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not -L <= layer < L:
        raise NormvizError(f"layer must be an integer in [0, {L}) (or negative from the end), not {layer!r}.")
    if isinstance(head, bool) or not isinstance(head, (int, np.integer)) or not 0 <= head < H:
        raise NormvizError(f"head must be an integer in [0, {H}), not {head!r}.")
    if not isinstance(by_token, (bool, np.bool_)):
        raise NormvizError(f"by_token must be True or False, not {by_token!r}.")
    by_token = bool(by_token)
    layer = int(layer) % L
    if lm.is_encoder_decoder:
        raise NotApplicableError(
            "attend: encoder–decoder models are not supported yet (self-attention stacks of "
            "decoder-only models: GPT-2, Llama, Qwen2 …)."
        )
    layer_module = lm.layers[layer]
    _refuse_unsupported(lm, layer_module)
    n = session.n_tokens
    i, j = position_index(query, n), position_index(key, n)
    if lm.is_causal and j > i:
        raise NormvizError(f"query {i} cannot attend to key {j} in a causal model (a later token).")
    from ..record.decompose import working_dtype

    _check_memory(session, layer, by_token, torch.empty((), dtype=working_dtype(lm.dtype)).element_size())
    with _lock(session):
        views = session.layers()
        ctx = views[layer]
        rec, norm = ctx.rec, ctx.p.norm_on_input
        _refuse_call(lm, rec.call)
        layer_module, call = _working_layer(layer_module, rec.call, rec.x.dtype)
        qk_norms = [
            (
                get_path(layer_module, path),
                _FrozenQK(_norm_params(get_path(layer_module, path), lm.spec.norm_kind, lm.spec.norm)),
            )
            for path in (lm.spec.qk_norms or ())
        ]
        capture = [m.register_forward_pre_hook(owner_only(f.capture)) for m, f in qk_norms]
        try:
            run = _runner(lm, ctx.p)
            real = run(layer_module, rec.x, _call(call))  # the model's own q, k (before the norms are frozen)
        finally:
            for h in capture:
                h.remove()
        if real is None:
            raise NotApplicableError("attend: this layer makes no call through transformers' attention interface.")
        c = _scaling(real, ctx.p.head_dim)
        frozen = _FrozenNorm(norm, norm.scale(rec.x))
        handles = [m.register_forward_hook(owner_only(f)) for m, f in qk_norms]
        if lm.spec.norm_on_input is not None:  # none in front of the attention (OLMo-2): x itself
            handles.append(get_path(layer_module, lm.spec.norm_on_input).register_forward_hook(owner_only(frozen)))
        try:
            names, states = components(views, layer)
            q, k, q_c, k_c = _split(run, layer_module, frozen, states.to(rec.x.dtype), call, i, j)
            q, k = torch.cat([q, q_c[None]]), torch.cat([k, k_c[None]])
            by_comp = _bilinear(q, k, head, H, c)
            full = None
            if by_token:
                parts = token_parts(views, layer).to(rec.x.dtype)
                tq, tk, tq_c, tk_c = _split(run, layer_module, frozen, parts, call, i, j)
                tq[-1] += tq_c
                tk[-1] += tk_c
                full = _bilinear(tq, tk, head, H, c).cpu().numpy()
        finally:
            for h in handles:
                h.remove()
        kv = head // (H // real.key.shape[1])
        model_score = c * float(real.query[0, head, i].to(torch.float64) @ real.key[0, kv, j].to(torch.float64))
    return Attend(
        layer=layer,
        head=head,
        query=i,
        key=j,
        total=float(by_comp.sum()),
        model_score=model_score,
        scaling=c,
        components=names + ["constant"],
        by_component=by_comp.cpu().numpy(),
        tokens=list(session.encoded.labels),
        by_token_full=full,
    )


__all__ = ["Attend", "attend", "attend_bytes", "components", "token_parts"]
