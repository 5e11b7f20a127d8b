"""DecompX (Modarressi et al. 2023): every token's part of every hidden state, propagated from the embeddings
through attention, residuals, both norms and the feed-forward block, without re-mixing between layers.

Layer l receives the parts X^{l-1}[i, k] of its input (Σ_k X[i, k] = x_i; X^0[i, k] = δ_ik x_k, the whole
embedding output) and pushes every part through each component; every bias is split over the parts:

    attention   A[i, k] = Σ_h Σ_j α^h_ij X̂[j, k] W^V_h W^O_h            (X̂ = X, pre-LN: the LN1 parts of X)
    residual    U[i, k] = A[i, k] + X[i, k] + w_ik·b                     b = b^V W^O + b^O
    norm        N(v)[i, k] = γ ⊙ (v_ik − mean v_ik) / √(Var(z_i) + ε) + w_ik·β   z_i the norm's real input
    FF          F[i, k] = (θ_i ⊙ (W_1 v_ik + w_ik·b_1)) W_2 + w'_ik·b_2,  θ_i = g(h_i) / h_i
    layer       post-LN  X^l = N2(N1(U) + F(N1(U)))      pre-LN  X^l = U + F(N2(U))

    decompx[l, i, k] = ‖X^l[i, k]‖                                                       [L, n, n]

Σ_k X^l[i, k] is the model's own layer output (the biases are all split, nothing is left over). The options
followed are those of the authors' demo (github.com/mohsenfayyaz/DecompX, ``DecompXConfig`` in
``src/decompx_utils.py``, the propagation in ``BertLayer.forward`` of ``src/modeling_bert.py``):

- ``include_biases=True, bias_decomp_type="absdot"``: a bias b of row i goes to the parts in proportion to
  |⟨v_ik, b⟩|, w_ik = |⟨v_ik, b⟩| / Σ_k' |⟨v_ik', b⟩| (b₁ by the dot product of the d_ff-vectors W_1 v_ik).
  Their ``+ 1e-12`` in the denominator is left out, so the split is exact; a row whose dot products are all
  zero (measure zero) gives its bias to the token itself (k = i).
- ``include_LN1=True, include_FFN=True, include_LN2=True``; the norms' scales from the real pre-norm vectors.
- ``FFN_approx_type="GeLU_ZO"``: the activation linearised per unit by its zero-origin slope θ = g(h)/h at
  the real pre-activation h (:func:`normviz.core.activations.activation_ratio`: exact, g′(0) at h = 0, where
  their code divides by h + 1e-12). Σ_k θ(W_1 v_ik + w_ik b_1) = θ h = g(h) exactly.
- ``aggregation="vector"``: the parts of one layer's output are the next layer's input parts.
- In the first layer the value bias stays inside f(x_j) = (x_j W^V + b^V) W^O (their attention branch without
  attribution vectors; paper §3.1, footnote 4) and only b^O is split; from the second layer on, b^V W^O
  (α's rows sum to 1 in every head) joins b^O.
- The classifier/pooler (``include_classifier_w_pooler``) is not part of normviz's maps: the key stops at
  the layer outputs.

Pre-LN (GPT-2) is normviz's extension, not the authors': the same rules, with LN1 before attention (X̂ its
parts, β₁ split) and the FF residual from U. Gated FF blocks (SwiGLU: Llama, Qwen …) are refused: the
product of two sums of parts has no zero-origin slope (every GQA model here is gated, so refused too).

Cost: the parts are [n, n, d] per layer by nature. Per layer the projections through W^V, W^O, W_1, W_2 cost
2n²d(2d + 2d_ff) FLOPs and the attention mixing 2n³d (:func:`flops`); ``check`` refuses above the option
``decompx_budget_s`` seconds. Memory: X and its value projection (2·n²·d numbers) plus row chunks of
[c, n, d_ff] bounded by the layer view's ``chunk_bytes``; X is overwritten row chunk by row chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Sequence

import torch

from ..core.errors import NotApplicableError
from . import papers
from .base import Budget, Inputs, KeyInfo, Output, Request, refuse_over_budget, to_numpy
from .family import Family

FAMILY = Family(
    name="decompx",  # the module's name (map key: decompx); "decomposition" is an alias
    order=100,
    keys=(
        KeyInfo(
            "decompx",
            "DecompX (propagated decomposition)",
            False,
            "‖x^l_{i⇐k}‖: token k's part of token i's output of layer l, the decomposition carried from the "
            "embeddings through attention, residuals, both norms and the FF block (biases split by |dot|, "
            "activation by its zero-origin slope; Modarressi et al. 2023). Opt-in: [n, n, d] per layer.",
            short="DecompX",
        ),
    ),
    budget=Budget("decompx", rates="decompx"),  # option decompx_budget_s, at DecompX's measured rate (methods.cost)
    opt_in=("decompx",),
    heavy=True,  # costly: the public app computes it in the worker process (normviz.workers.process)
    references=(papers.MODARRESSI_2023,),
)


def flops(request: Request) -> float:
    """Multiply-adds ×2 per layer: the n² parts through W^V, W^O (d×d each), W_1 and W_2 (d×d_ff each), and
    the attention mixing Σ_j α_ij over n³·d. (Norms, bias splits and the activation are O(n²·d).)"""
    n, d, d_ff = request.n_tokens, request.d_model, request.d_ff
    return request.n_layers * (2.0 * n * n * d * (2 * d + 2 * d_ff) + 2.0 * n**3 * d)


def check(request: Request, key: str, options: dict) -> None:
    if request.gated:
        raise NotApplicableError(
            f"{key!r} (DecompX) linearises an element-wise FF activation by its zero-origin slope g(h)/h; this "
            "model's gated FF (SwiGLU) multiplies two sums of token parts and has no such split. Use ff / ff_res "
            "(integrated gradients through the gate) or rollout_ff_res instead."
        )
    refuse_over_budget(request, key, options, FAMILY.budget, flops)


# ---------------------------------------------------------------- the pieces (row chunks [c, n, ·])
@dataclass(frozen=True)
class Rules:
    """What the propagation does with the biases. ``bias="absdot"`` (DecompX): every bias is split over the
    token parts by |dot|, and in the first layer b^V rides with its token (footnote 4). ``bias="part"`` (the
    prediction attribution, :mod:`normviz.attribution.propagate`): the parts axis has one more entry, the last,
    which takes every bias (b^V W^O and b^O in every layer, the norms' β, the FF biases) and is carried through
    every component like a token's part. Either way Σ over the parts is the model's own vector."""

    bias: str = "absdot"

    @property
    def first_value_bias_with_token(self) -> bool:
        return self.bias == "absdot"


DECOMPX = Rules("absdot")
BIAS_PART = Rules("part")


def add_bias(parts: torch.Tensor, bias: torch.Tensor, rows: slice, rules: Rules = DECOMPX) -> torch.Tensor:
    """parts[i, ·] gets ``bias`` (in place): split by absdot (:func:`split_bias`) or added to the bias part."""
    if rules.bias == "part":
        parts[:, -1] += bias
        return parts
    return split_bias(parts, bias, rows)


def split_bias(parts: torch.Tensor, bias: torch.Tensor, rows: slice) -> torch.Tensor:
    """parts[i, k] += w_ik·bias (in place), w_ik = |⟨parts_ik, bias⟩| / Σ_k |⟨parts_ik, bias⟩| ("absdot");
    a row whose dot products are all zero gives the bias to k = i. parts [c, n, e] contiguous, bias [e]."""
    c, n, e = parts.shape
    flat = parts.view(c * n, e)
    w = (flat @ bias).view(c, n).abs_()
    den = w.sum(-1, keepdim=True)
    w /= torch.where(den > 0, den, torch.ones_like(den))
    dead = (den[:, 0] == 0).nonzero().flatten()
    if dead.numel():
        w[dead, dead + rows.start] = 1.0
    flat.addmm_(w.view(-1, 1), bias.view(1, -1))  # one rank-1 update, no [c, n, e] temporary
    return parts


def norm_parts(parts: torch.Tensor, norm, z: torch.Tensor, rows: slice, rules: Rules = DECOMPX) -> torch.Tensor:
    """The norm applied to the parts (in place): γ⊙(v − mean v)/s_i (RMSNorm γ⊙v/s_i), s_i from the real
    input z [c, d] of the norm; β split by absdot (or to the bias part)."""
    if norm.kind == "layernorm":
        parts.sub_(parts.mean(-1, keepdim=True))
    parts.mul_(norm.weight / norm.scale(z)[:, None, None])
    if norm.bias is not None:
        add_bias(parts, norm.bias, rows, rules)
    return parts


def ff_factors(ctx, ff_in: torch.Tensor | None = None, pre: list[torch.Tensor] | None = None) -> list[torch.Tensor]:
    """The per-unit factors [n, d_ff] of the FF activation at the block's real input ``ff_in`` (default: the
    attention residual's norm output by its formula, :attr:`~normviz.record.decompose.LayerDecomposition.ln_attn_out`),
    or at the real pre-activations ``pre`` themselves (gated: gate, up) where they are already known:
    an element-wise g: [θ = g(h)/h], DecompX's zero-origin
    slope, which is also the integrated-gradients share of a part; SwiGLU: the integrated-gradients factors of
    the gate and up parts (:func:`normviz.methods.feedforward.unit_factors`, the same split as the FF maps)."""
    from .feedforward import out_rows, unit_factors

    p = ctx.p
    if pre is None:
        if ff_in is None:
            ff_in = ctx.ln_attn_out  # by the parts' own formula: the end point the parts sum to
        pre = [
            ff_in @ w + b if b is not None else ff_in @ w
            for w, b in [(p.w_in, p.b_in)] + ([(p.w_up, p.b_up)] if p.ff_kind != "mlp" else [])
        ]
    return out_rows(ctx, unit_factors(ctx, *pre))


def live_parts(flat: torch.Tensor, dense: float = 0.75) -> torch.Tensor | None:
    """The rows of ``flat`` [r, e] that are not all zero, or None when more than ``dense`` of them are not.
    A causal decoder's parts are exactly zero for every token after the row (token k reaches rows i ≥ k only):
    about half of the n·(n+1) parts, which every linear map and bias rule keeps at zero."""
    nonzero = flat.ne(0).any(-1)
    k = int(nonzero.sum())
    return None if k > dense * flat.shape[0] else nonzero.nonzero().squeeze(1)


def rows_matmul(flat: torch.Tensor, w: torch.Tensor, live: torch.Tensor | None) -> torch.Tensor:
    """flat @ w, multiplying only the ``live`` rows (the others are zero, and so are their products)."""
    if live is None:
        return flat @ w
    out = flat.new_zeros(flat.shape[0], w.shape[1])
    out[live] = flat[live] @ w
    return out


def ff_parts(
    ctx, parts: torch.Tensor, rows: slice, factors: Sequence[torch.Tensor], rules: Rules = DECOMPX
) -> torch.Tensor:
    """F[i, k] = (θ_i ⊙ (W_1 v_ik + w_ik b_1)) W_2 + w'_ik b_2 for the FF input parts v [c, n, d]; SwiGLU:
    (c^gate_i ⊙ (W_g v_ik + ·) + c^up_i ⊙ (W_u v_ik + ·)) W_2 + ·, the factors of :func:`ff_factors`."""
    p = ctx.p
    c, n, d = parts.shape
    flat = parts.reshape(c * n, d)
    live = live_parts(flat)
    h = rows_matmul(flat, p.w_in, live).view(c, n, -1)
    if p.b_in is not None:
        add_bias(h, p.b_in, rows, rules)
    h.mul_(factors[0][rows, None, :])
    if p.ff_kind != "mlp":
        g = rows_matmul(flat, p.w_up, live).view(c, n, -1)
        if p.b_up is not None:
            add_bias(g, p.b_up, rows, rules)
        h.add_(g.mul_(factors[1][rows, None, :]))
    hf = h.view(c * n, -1)
    out = rows_matmul(hf, p.w_out, live_parts(hf)).view(c, n, d)
    if p.b_out is not None:
        add_bias(out, p.b_out, rows, rules)
    return out


def _value_projection(ctx, X: torch.Tensor, first: bool, rules: Rules = DECOMPX) -> torch.Tensor:
    """The parts' values per kv head, [KV, j, k·dh]: X̂[j, k] W^V (first layer, DecompX: + δ_jk b^V), in chunks
    of j (GQA: a group of query heads shares one kv head's values)."""
    p = ctx.p
    n, m, d = X.shape
    KV, dh = p.n_kv_heads, p.head_dim
    out = torch.empty(KV, n, m * dh, dtype=X.dtype, device=X.device)
    for jr in ctx.row_chunks():
        src = X[jr]
        if p.norm_on_input is not None:  # pre-LN: the LN1 parts of the layer input
            src = norm_parts(src.clone(), p.norm_on_input, ctx.rec.x[jr], jr, rules)
        c = jr.stop - jr.start
        v = (src.reshape(c * m, d) @ p.w_v).view(c, m, KV, dh)
        if first and rules.first_value_bias_with_token and p.b_v is not None:
            idx = torch.arange(jr.start, jr.stop, device=X.device)
            v[idx - jr.start, idx] += p.b_v.view(KV, dh)
        out[:, jr] = v.permute(2, 0, 1, 3).reshape(KV, c, m * dh)
    return out


def value_bias(p) -> torch.Tensor:
    """b^V W^O, the value bias through the output projection (GQA: each head's kv head's b^V): what every row
    of the attention output carries, since each head's α row sums to 1."""
    group = p.n_heads // p.n_kv_heads
    return p.b_v.view(p.n_kv_heads, p.head_dim).repeat_interleave(group, 0).reshape(-1) @ p.w_o


def row_bias(ctx) -> torch.Tensor:
    """What the attention block adds to each row [n, d] besides the token parts: b^O (through a norm P_a after
    the attention: its linear part / s_i) + Σ_h (Σ_j α̃^h_ij) b^V_h W^O_h. α's rows sum to 1 only to the
    precision of the model's softmax (float32 in the Llama family, even in a float64 model), so each row's
    own sum is used, not 1."""
    p = ctx.p
    out = ctx.out_bias().clone()
    if p.b_v is not None:
        group = p.n_heads // p.n_kv_heads
        bv = p.b_v.view(p.n_kv_heads, 1, p.head_dim).repeat_interleave(group, 0)  # [H, 1, dh]
        per_head = torch.bmm(bv, p.head_w_o())[:, 0]  # [H, d]
        out = out + ctx.mix_alpha.sum(-1).T.to(per_head.dtype) @ per_head
    return out


def attention_parts(ctx, values: torch.Tensor, rows: slice, m: int) -> torch.Tensor:
    """Σ_h Σ_j α^h_ij (X̂[j, k] W^V) W^O_h for the rows: [c, m, d] (values from :func:`_value_projection`)."""
    p = ctx.p
    return mix_values(ctx.mix_alpha, values, p.w_o, p.n_heads, p.n_kv_heads, p.head_dim, rows, m)


def mix_values(
    alpha: torch.Tensor, values: torch.Tensor, w_o: torch.Tensor, H: int, KV: int, dh: int, rows: slice, m: int
) -> torch.Tensor:
    """Σ_h Σ_j α^h_ij values^{kv(h)}[j, k] W^O_h: α [H, ·, n_j], values [KV, n_j, m·dh] → [c, m, d]."""
    c = rows.stop - rows.start
    a = alpha[:, rows].reshape(KV, (H // KV) * c, -1)  # heads h = kv·G + g share kv head kv
    mixed = torch.bmm(a, values).view(H, c, m, dh)
    return (mixed.permute(1, 2, 0, 3).reshape(c * m, H * dh) @ w_o).view(c, m, -1)


def _bytes_per_cell(ctx) -> int:
    """What one part (i, k) of a row chunk holds at once: the d_ff-vector(s) and a few d-vectors."""
    d_ff, d = ctx.p.w_out.shape
    return ((2 if ctx.p.ff_kind != "mlp" else 1) * d_ff + 5 * d) * ctx.rec.x.element_size()


def propagate(ctx, X: torch.Tensor, first: bool, rules: Rules = DECOMPX, cross=None) -> torch.Tensor:
    """One layer: the parts X [n, m, d] of its input → the parts of its output, written into X (m = n parts,
    or n + 1 with the bias part, :class:`Rules`). GQA and gated FF blocks are propagated too (the decompx key
    refuses them in ``check``: DecompX's bias and activation rules are the authors' for BERT).

    ``cross``: a decoder layer of an encoder–decoder, whose cross block sits between the self-attention and
    the FF: an object with ``parts(rows)`` (the cross attention output's parts [c, m, d], biases included),
    ``norm`` (post-LN: the norm after the cross residual; pre-LN: the FF's input norm), ``z`` [n, d] (that
    norm's real input) and, post-LN, ``z_ff`` [n, d] (the real input of the norm after the FF residual)."""
    p = ctx.p
    n, m, d = X.shape
    values = _value_projection(ctx, X, first, rules)
    bias = p.b_o if p.b_o is not None else torch.zeros(d, dtype=X.dtype, device=X.device)
    rows_bias = row_bias(ctx) if rules.bias == "part" else None  # per row, exact (one bias part takes it)
    if rows_bias is None and not (first and rules.first_value_bias_with_token) and p.b_v is not None:
        bias = bias + value_bias(p)
    norm2 = p.norm_on_ff_residual
    if cross is None:
        ff_norm, ff_z, z_ff = ctx.ln_attn, ctx.ff_z, ctx.rec.z_ff
    else:
        ff_norm, ff_z, z_ff = cross.norm, cross.z, getattr(cross, "z_ff", None)
    factors = ff_factors(ctx, ff_norm.apply(ff_z))
    for rows in ctx.row_chunks(_bytes_per_cell(ctx)):
        u = attention_parts(ctx, values, rows, m)
        u += X[rows]
        if rows_bias is not None:
            u[:, -1] += rows_bias[rows]
        else:
            add_bias(u, bias, rows, rules)
        if norm2 is not None:  # post-LN: LN1 on the residual, FF residual from LN1's output, then LN2
            ell = norm_parts(u, ctx.ln_attn, ctx.rec.z_attn[rows], rows, rules)
            if cross is not None:  # the cross block and its norm between
                ell = norm_parts(ell + cross.parts(rows), cross.norm, cross.z[rows], rows, rules)
            out = ell + ff_parts(ctx, ell, rows, factors, rules)
            norm_parts(out, norm2, z_ff[rows], rows, rules)
        else:  # pre-LN: LN2 parts feed the FF; the residual carries U
            if cross is not None:
                u += cross.parts(rows)
            # a parallel block's FF reads the layer input's parts X, not U
            ell = norm_parts((X[rows] if p.parallel else u).clone(), ff_norm, ff_z[rows], rows, rules)
            out = u + ff_parts(ctx, ell, rows, factors, rules)
        X[rows] = out
    return X


def decompx_vectors(layers: Sequence, progress=None, rules: Rules = DECOMPX) -> Iterator[torch.Tensor]:
    """The parts X^l [n, m, d] of every layer's output, in order (m = n; with ``rules=BIAS_PART`` m = n + 1,
    the last the bias part). One buffer is yielded each time and overwritten by the next layer (clone what
    you keep)."""
    X = None
    for index, ctx in enumerate(layers):
        if X is None:
            x = ctx.rec.x
            n, d = x.shape
            X = torch.zeros(n, n + (rules.bias == "part"), d, dtype=x.dtype, device=x.device)
            X[torch.arange(n), torch.arange(n)] = x  # X^0[i, k] = δ_ik x_k
        elif X.device != ctx.device:  # a model sharded over devices
            X = X.to(ctx.device)
        propagate(ctx, X, first=index == 0, rules=rules)
        yield X
        ctx.clear()
        if progress:
            progress(index)


def compute(inputs: Inputs, keys, options) -> Output:
    layers = inputs.layers
    out = None
    for index, X in enumerate(decompx_vectors(layers, lambda i: inputs.layer_done(FAMILY.name, i))):
        m = to_numpy(torch.linalg.vector_norm(X, dim=-1))
        if out is None:
            out = m[None].repeat(len(layers), axis=0)
        out[index] = m
    note = (
        "DecompX as the authors' demo: biases split by |dot| (absdot), activation by g(h)/h (GeLU_ZO), "
        "vector aggregation, value bias inside f(x_j) in the first layer"
    )
    return Output({"decompx": out}, {"decompx": note})
