"""Every input token's part of a logit in one backward pass: the adjoint of the frozen-coefficient network.

The forward propagation (:mod:`normviz.attribution.propagate`) carries each part X^l[·, k] through every
component with the model's own coefficients frozen at the recorded pass: α, each norm's real scale 1/s_i (and
γ, mean-subtraction for LayerNorm), the FF's integrated-gradient factors (which depend only on the totals).
With them frozen, one layer maps a part linearly, the same map for every part; the biases are injected into
the bias part only. So, with L_l layer l's linear map and u the readout direction,

    part of token k in the logit   = ⟨r, L_{L−1} ⋯ L_0 x⁰_k⟩ = ⟨g⁰_k, x⁰_k⟩,   g^l = L_lᵀ g^{l+1},  g^L = δ_i r

(r the readout vector: the final norm's frozen linear part applied to u = W_U[w] − W_U[f]; BERT's MLM head:
its dense layer, activation split by g(h)/h, and its LayerNorm, transposed). One pass of g backwards through
the layers gives every token's part at once, in O(n·d) memory per layer instead of the parts' O(n²·d).

Per layer (row vectors, per receiving row i; N(v) = γ⊙centre(v)/s_i, Nᵀ(w) = centre(γ⊙w)/s_i):

    pre-LN   x' = U + F(N2(U)),  U = x + Σ_h α^h (N1(x) W^V_h W^O_h) + b
             g_U = g' + N2ᵀ(Fᵀ g'),   g_x = g_U + N1ᵀ(Σ_h α^hᵀ (g_U W^O_hᵀ) W^V_hᵀ)
    post-LN  x' = N2(ℓ + F(ℓ)),  ℓ = N1(U),  U = x + Σ_h α^h (x W^V_h W^O_h) + b
    FF       Fᵀ g = ((g W_outᵀ) ⊙ θ) W_inᵀ;  SwiGLU: ((g W_outᵀ) ⊙ c_gate) W_gateᵀ + ((g W_outᵀ) ⊙ c_up) W_upᵀ
    GQA      the query heads of one kv head sum their α^hᵀ(g W^O_hᵀ) before W^Vᵀ
    cross    (encoder–decoder decoders) the cross block's input adjoint goes to the encoder output e:
             g_e += Σ_h β^hᵀ (g W^O_hᵀ) W^V_hᵀ, then backwards through the encoder (and its final norm)

Every bias b injected at a point with adjoint g adds Σ_i ⟨g_i, b⟩ to the bias part (b^O and b^V W^O, β of
every norm, the FF biases before their factors, the readout's constants): :attr:`Backward.bias_by_layer`.
The depth profile ``by_layer[l, j] = ⟨g^l_j, x^l_j⟩`` (x^l_j the real residual state entering layer l, row L
the output) satisfies Σ_j by_layer[l, j] + Σ_{l' ≥ l} bias_by_layer[l'] = the logit (difference).

Long inputs whose α is recomputed from q, k (:mod:`normviz.record.attention_capture`) stream it in blocks of
receiving rows: α^hᵀ P is accumulated block by block, never the whole [H, n, n].
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..core.activations import activation_ratio
from ..core.errors import TooCostlyError
from ..methods import decompx
from ..methods.base import Request
from ..methods.cost import Budget, refuse_over_budget
from ..methods.family import Family
from ..methods.registry import register_computation

BUDGET = Budget("explain", rates="decompx")  # option explain_budget_s, at DecompX's measured rate (methods.cost)
MAX_BYTES = 2 * 2**30  # option explain_max_bytes
CACHE_BYTES = 256 * 2**20  # option explain_cache_bytes: the FF factors kept per text for the next candidate
ALPHA_BLOCK_BYTES = 32 * 2**20


# ---------------------------------------------------------------- cost
def flops(request: Request) -> float:
    """Multiply-adds ×2 of the backward pass per layer: W^O, W^V (≈ d×d each), the FF matrices (2 or 3 of
    d×d_ff) and their factors' pre-activations (1 or 2 more), α's transpose on n²·d; a long input's α
    recomputed from q, k (n²·d more)."""
    n, d, d_ff = request.n_tokens, request.d_model, request.d_ff
    ff = (5 if request.gated else 3) * d_ff
    return request.n_layers * (2.0 * n * d * (2 * d + ff) + 4.0 * n * n * d)


def memory_bytes(request: Request, itemsize: int = 4) -> int:
    """The working set of one layer: a few [n, d] adjoints, the FF's [n, d_ff] factors and products (and
    their float64 integrals), and one block of α."""
    n, d, d_ff = request.n_tokens, request.d_model, request.d_ff
    return int(n * (8 * d + 6 * d_ff) * itemsize + 3 * n * d_ff * 8 + ALPHA_BLOCK_BYTES)


def check(request: Request, options: dict, itemsize: int = 4) -> None:
    """TooCostlyError when the backward pass would not fit ``explain_max_bytes`` (default 2 GiB; the message
    says the size it needs) or would exceed ``explain_budget_s`` at the device's rate."""
    limit = int(options.get("explain_max_bytes", MAX_BYTES))
    need = memory_bytes(request, itemsize)
    if need > limit:
        raise TooCostlyError(
            f"sources for {request.n_tokens} tokens needs about {need / 2**20:.0f} MiB for one "
            f"layer's backward pass (limit {limit / 2**20:.0f} MiB, option explain_max_bytes). "
            "Raise the limit or shorten the text; the direct parts (heads, ff …) need no more."
        )
    refuse_over_budget(
        request, "sources", options, BUDGET, flops, note="The direct parts (heads, ff …) cost about one forward pass."
    )


register_computation(Family(name="explain", keys=(), own_check=check, budget=BUDGET))


# ---------------------------------------------------------------- the pieces
def norm_adjoint(norm, g: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Nᵀ g for N(v) = γ⊙centre(v)/s_i (RMSNorm: γ⊙v/s_i), s_i from the norm's real input z [n, d]."""
    w = g * (norm.weight.to(g.dtype) / norm.scale(z).to(g.dtype)[:, None])
    if norm.kind == "layernorm":
        w = w - w.mean(-1, keepdim=True)
    return w


def _dot(g: torch.Tensor, b: torch.Tensor | None) -> float:
    """Σ_i ⟨g_i, b⟩ (float64): the part of a bias b added to every row of a point whose adjoint is g."""
    if b is None:
        return 0.0
    return float(g.sum(0).to(torch.float64) @ b.to(torch.float64))


def _rows_dot(g: torch.Tensor, b: torch.Tensor) -> float:
    """Σ_i ⟨g_i, b_i⟩ (float64) for a bias b [n, d] that differs per row."""
    return float((g.to(torch.float64) * b.to(torch.float64)).sum())


def ff_adjoint(p, g: torch.Tensor, factors) -> tuple[torch.Tensor, float]:
    """(Fᵀ g, the FF biases' part): g [n, d] at the FF output → at its input, with the frozen factors."""
    h = g @ p.w_out.T
    bias = _dot(g, p.b_out)
    a = h * factors[0]
    bias += _dot(a, p.b_in)
    out = a @ p.w_in.T
    if p.ff_kind != "mlp":
        b = h.mul_(factors[1])
        bias += _dot(b, p.b_up)
        out.addmm_(b, p.w_up.T)
    return out, bias


def mix_adjoint(rec_or_alpha, P: torch.Tensor, block_bytes: int | None = None) -> torch.Tensor:
    """Σ_i α^h_ij P^h_i per head: [H, n_j, dh] from P [H, n_i, dh]; α recorded ([H, n_i, n_j] tensor or a
    record holding it), or a long input's α recomputed from q, k in blocks of rows (never whole)."""
    rec = rec_or_alpha
    alpha = rec if isinstance(rec, torch.Tensor) else rec.attn
    if alpha is not None:
        return torch.bmm(alpha.to(P.dtype).transpose(1, 2), P)
    H, n, dh = P.shape
    out = P.new_zeros(H, rec.x.shape[0], dh)
    for a, b, cols, block in rec.attention_inputs().blocks(block_bytes or ALPHA_BLOCK_BYTES):
        out[:, :cols].baddbmm_(block.to(P.dtype).transpose(1, 2), P[:, a:b])
    return out


def attention_adjoint(ctx, g: torch.Tensor) -> torch.Tensor:
    """g at the attention output [n, d] → at its value input x̂ [n, d]: Σ_h α^hᵀ (g W^O_hᵀ) W^V_hᵀ, the query
    heads of a kv head summed first (GQA)."""
    p = ctx.p
    n = g.shape[0]
    H, KV, dh = p.n_heads, p.n_kv_heads, p.head_dim
    if ctx.attn_row_scale is not None:  # a norm P_a after the attention: 1/s_i at the receiving row (γ in W^O)
        g = g * ctx.attn_row_scale[:, None].to(g.dtype)
    P = (g @ p.w_o.T).view(n, H, dh).transpose(0, 1)
    Q = mix_adjoint(ctx.rec, P)  # [H, n, dh]
    if KV != H:
        Q = Q.view(KV, H // KV, n, dh).sum(1)
    return Q.transpose(0, 1).reshape(n, KV * dh) @ p.w_v.T


def attention_bias(p) -> torch.Tensor | None:
    """b^O + b^V W^O: what the attention block adds to every row (α's rows sum to 1), or None."""
    bias = p.b_o
    if p.b_v is not None:
        vb = decompx.value_bias(p)
        bias = vb if bias is None else bias + vb
    return bias


@dataclass
class CrossAdjoint:
    """One decoder layer's cross block for :func:`layer_adjoint`: β [H, m, n_src], its weights, the norm after
    its residual (post-LN) or the FF's input norm (pre-LN) with that norm's real input z, and (post-LN) the
    real input of the norm after the FF residual."""

    alpha: torch.Tensor
    params: object
    norm: object
    z: torch.Tensor
    z_ff: torch.Tensor | None

    def adjoint(self, g: torch.Tensor) -> tuple[torch.Tensor, float]:
        """(g at the encoder output e [n_src, d], the cross biases' part) from g at the block's output."""
        p = self.params
        m = g.shape[0]
        bias = _dot(g, p.b_o) + (_dot(g, p.b_v @ p.w_o) if p.b_v is not None else 0.0)
        P = (g @ p.w_o.to(g.dtype).T).view(m, p.n_heads, p.head_dim).transpose(0, 1)
        Q = mix_adjoint(self.alpha, P)
        return Q.transpose(0, 1).reshape(Q.shape[1], -1) @ p.w_v.to(g.dtype).T, bias


def ff_input(ctx, cross: CrossAdjoint | None = None):
    """(the FF's input norm, its real input z, the real input of the norm after the FF residual or None)."""
    if cross is None:
        return ctx.ln_attn, ctx.ff_z, ctx.rec.z_ff
    return cross.norm, cross.z, cross.z_ff


def recorded_pre_activations(ctx) -> list[torch.Tensor] | None:
    """The FF's real pre-activations [n, d_ff] (gated: gate, up) as the recording pass kept them (``keep_ff``),
    taken from the record (each is read once: the factors made from them are what is kept), or None."""
    rec, p = ctx._rec, ctx.p  # the session's record itself (kept only in float32, the working dtype: no copy)
    a, b = rec.ff_a, rec.ff_b
    if a is None:
        return None
    rec.ff_a = rec.ff_b = None  # of no further use, whether taken or not
    d_ff = p.w_in.shape[1]
    if p.ff_kind != "mlp" and b is None and a.shape[-1] == 2 * d_ff:  # one fused module: gate | up
        a, b = a[:, :d_ff], a[:, d_ff:]
    if a.dtype != ctx.dtype or a.shape[-1] != d_ff or (p.ff_kind != "mlp" and b is None):  # e.g. the up not kept
        return None
    return [a] if p.ff_kind == "mlp" else [a, b]


def factors_of(ctx, cross: CrossAdjoint | None = None) -> list[torch.Tensor]:
    """The FF's frozen integrated-gradients factors at the block's real input (as the forward propagation): from
    the pre-activations the recording pass kept (:func:`recorded_pre_activations`; the model's own, so the FF input
    projections are not computed again), else from the norm's output at the block's real input."""
    pre = recorded_pre_activations(ctx) if cross is None else None
    if pre is not None:
        return decompx.ff_factors(ctx, pre=pre)
    norm, z, _ = ff_input(ctx, cross)
    return decompx.ff_factors(ctx, norm.apply(z))


def layer_adjoint(ctx, g: torch.Tensor, factors, cross: CrossAdjoint | None = None):
    """One layer backwards: g at its output [n, d] → (g at its input, the part of the biases it injects,
    g at the encoder output from its cross block or None)."""
    p = ctx.p
    ff_norm, ff_z, z_ff = ff_input(ctx, cross)
    norm2 = p.norm_on_ff_residual
    g_e = None
    if norm2 is not None:  # post-LN: x' = N2(ℓ + F(ℓ)), ℓ = N1(U) (cross: ℓ = Nc(N1(U) + C))
        bias = _dot(g, norm2.bias)
        g_out = norm_adjoint(norm2, g, z_ff)
        f, b = ff_adjoint(p, g_out, factors)
        g_ell = g_out + f
        bias += b
        if cross is not None:
            bias += _dot(g_ell, cross.norm.bias)
            g_ell = norm_adjoint(cross.norm, g_ell, cross.z)
            g_e, b = cross.adjoint(g_ell)
            bias += b
        bias += _dot(g_ell, ctx.ln_attn.bias)
        g_u = norm_adjoint(ctx.ln_attn, g_ell, ctx.rec.z_attn)
        bias += _rows_dot(g_u, decompx.row_bias(ctx))
        return g_u + attention_adjoint(ctx, g_u), bias, g_e
    # pre-LN: x' = U + F(N2(U)), U = x + A(N1(x)) + b (+ C)
    f, bias = ff_adjoint(p, g, factors)
    bias += _dot(f, ff_norm.bias)
    ff_back = norm_adjoint(ff_norm, f, ff_z)
    g_u = g if p.parallel else g + ff_back  # a parallel block's FF reads x, not U
    if cross is not None:
        g_e, b = cross.adjoint(g_u)
        bias += b
    bias += _rows_dot(g_u, decompx.row_bias(ctx))
    g_hat = attention_adjoint(ctx, g_u)
    n1 = p.norm_on_input
    bias += _dot(g_hat, n1.bias)
    out = g_u + norm_adjoint(n1, g_hat, ctx.rec.x)
    return (out + ff_back if p.parallel else out), bias, g_e


def readout_adjoint(readout, u: torch.Tensor, b: float, x_last: torch.Tensor) -> tuple[torch.Tensor, float]:
    """(r [d], c), float64: the readout's part of any part p of x^L_i is ⟨p, r⟩, its biases' part c
    (:meth:`normviz.attribution.readout.Readout.project_parts`, transposed)."""
    acc = torch.float64
    u, x_last = u.to(acc), x_last.to(acc)
    if readout.transform is None:
        return readout.vector(u, x_last), readout.constant(u, b)
    dense, act, norm = readout.transform
    w = dense.weight.T.to(acc)
    real = x_last @ w
    if dense.bias is not None:
        real = real + dense.bias.to(acc)
    c = u * norm.weight.to(acc)
    if norm.kind == "layernorm":
        c = c - c.mean()
    y = activation_ratio(act, real) * (c / norm.scale(act(real)))
    const = b + (float(norm.bias.to(acc) @ u) if norm.bias is not None else 0.0)
    if dense.bias is not None:
        const += float(dense.bias.to(acc) @ y)
    return w @ y, const


# ---------------------------------------------------------------- the pass
def held_bytes(views) -> int:
    """Bytes of FF pre-activations the records of ``views`` still hold (``keep_ff``; each dropped once read)."""
    recs = [getattr(v, "_rec", None) for v in views]
    return sum(t.numel() * t.element_size() for r in recs if r is not None for t in (r.ff_a, r.ff_b) if t is not None)


class Frozen:
    """What every candidate, foil and position of one text shares: the FF factors per layer (kept while they
    fit ``limit`` bytes together with the FF pre-activations the records still hold; else recomputed per
    backward pass)."""

    def __init__(self, limit: int = CACHE_BYTES):
        self.limit = limit
        self._factors: dict = {}
        self._bytes = 0

    def factors(self, key, ctx, cross=None, views=()) -> list[torch.Tensor]:
        """Layer ``key``'s factors; ``views``: the stack's layer views, whose records' FF pre-activations still
        held (:func:`held_bytes`, counted after this layer's own are read) count against the limit."""
        got = self._factors.get(key)
        if got is None:
            got = factors_of(ctx, cross)
            size = sum(t.numel() * t.element_size() for t in got)
            if self._bytes + size + held_bytes(views) <= self.limit:
                self._factors[key] = got
                self._bytes += size
        return got


@dataclass
class Backward:
    """The backward pass's results (float64 CPU tensors).

    sources [n_all]         each input token's part (encoder–decoders: source tokens, then target tokens)
    by_layer [L+1, n_all]   ⟨g^l_j, x^l_j⟩ of the (decoder) stack's layer inputs, row L its output;
                            encoder–decoders: a source column is ⟨g_e, e_j⟩ of the encoder output's part read
                            by the cross blocks of layers ≥ l
    bias_by_layer [L+1]     the biases injected in layer l (row L: the readout's own constant)
    encoder_bias            encoder–decoders: the encoder's biases (inside e), else 0
    """

    sources: torch.Tensor
    by_layer: torch.Tensor
    bias_by_layer: torch.Tensor
    encoder_bias: float = 0.0

    @property
    def bias(self) -> float:
        """Every bias's part, computed directly (Σ sources + bias = the logit up to rounding)."""
        return float(self.bias_by_layer.sum()) + self.encoder_bias


def _row(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    return (g.to(torch.float64) * x.to(torch.float64)).sum(-1).cpu()


def stack_adjoint(views, g: torch.Tensor, frozen: Frozen, tag: str = "", crosses=None, progress=None):
    """g at the stack's output → (g at its input, rows ⟨g^l, x^l⟩ [L, n] (l = 0 … L−1), biases per layer [L],
    g at the encoder output per layer (crosses) or None). Each view is cleared after its layer."""
    L = len(views)
    rows, biases, g_es = [None] * L, [0.0] * L, [None] * L
    for l in range(L - 1, -1, -1):
        ctx = views[l]
        g = g.to(device=ctx.device, dtype=ctx.dtype)
        cross = crosses[l] if crosses is not None else None
        g, biases[l], g_es[l] = layer_adjoint(ctx, g, frozen.factors((tag, l), ctx, cross, views), cross)
        rows[l] = _row(g, ctx.rec.x)
        ctx.clear()
        if progress:
            progress(L - l)
    return g, torch.stack(rows), torch.tensor(biases, dtype=torch.float64), g_es


def output_adjoint(readout, t, last) -> tuple[torch.Tensor, torch.Tensor, float]:
    """(g^L [n, d]: δ_i r in the last layer's dtype, the output row [n] of ``by_layer``: ⟨r, x^L_i⟩ at i,
    the readout's constant) for target ``t`` on the stack whose last layer view is ``last``."""
    r, const = readout_adjoint(readout, t.u, t.b, t.x_last)
    n, d = last.rec.x.shape
    g = torch.zeros(n, d, dtype=last.dtype, device=last.device)
    g[t.i] = r.to(device=last.device, dtype=last.dtype)
    top = torch.zeros(n, dtype=torch.float64)
    top[t.i] = float(r @ t.x_last.to(torch.float64))
    return g, top, const


def backward(views, readout, t, frozen: Frozen | None = None, progress=None) -> Backward:
    """The logit (difference) of target ``t`` (:class:`normviz.attribution.Target`) split over a
    self-attention stack's input tokens and depths by one backward pass."""
    frozen = frozen or Frozen()
    g, top, const = output_adjoint(readout, t, views[-1])
    g0, rows, biases, _ = stack_adjoint(views, g, frozen, progress=progress)
    return Backward(
        sources=rows[0].clone(),
        by_layer=torch.cat([rows, top[None]]),
        bias_by_layer=torch.cat([biases, torch.tensor([const], dtype=torch.float64)]),
    )
