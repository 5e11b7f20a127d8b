"""Effective attention (Brunner et al. 2020, "On Identifiability in Transformers").

Head h of a layer outputs Σ_j α^h_ij T^h_j with T^h = x̂ W^V_h (+ b^V_h) W^O_h ∈ ℝ^{n×d}, i.e. the head
vectors f^h(x_j) stacked as rows. Any row vector v with vᵀT^h = 0 (the left null space of T^h) can be added
to α^h_i without changing the output, so only the component of α^h_i in the column space of T^h matters:

    α̃^h_i = α^h_i − P_null(T^h) α^h_i = α^h_i · U_r U_rᵀ

with T^h = U S Vᵀ its SVD and U_r the left singular vectors of the r singular values above
``rtol · s_max`` (a rank tolerance relative to the largest singular value; default ``max(n, d) · ε`` with
ε = 2.2e-16, numpy ``matrix_rank``'s rule for float64, since T is computed in float64 from the model's
weights; option ``effective_rtol``).

rank(T^h) ≤ head size, so the null space is empty (r = n) when n ≤ head size and α̃ = α exactly. For
longer inputs rows change (they need not sum to 1 nor stay non-negative) while α̃·T = α·T.

Causal models: token i can only attend to its prefix, so an alternative attention row must keep zeros on
j > i and the rows it can be shifted by are the left null space of the prefix T^h_{≤i} (rows 0…i). Row i
is therefore projected onto the column space of T^h_{≤i}: α̃_i[:i+1] = α_i[:i+1]·U_rU_rᵀ with U_r from the
SVD of T^h_{≤i} (same relative tolerance) and α̃_i[j] = 0 for j > i. Rows with i + 1 ≤ head size keep α
(generically). Option ``effective_causal="full"`` applies the encoder formula with the whole T^h instead,
which can move weight onto future tokens.

The value bias. T^h as above includes b^V_h (the head's output really is Σ_j α_ij T^h_j, bias included), the
default. Option ``effective_value_bias=False`` uses T^h = x̂ W^V_h W^O_h instead, the form of Brunner et
al.'s derivation (which writes the value map without a bias): since Σ_j α_ij = 1, the bias part
Σ_j α_ij b^V_h W^O_h is the same for every attention row, so one may leave it out of T and project on the
column space of the token-dependent part only. The two differ only when the bias direction is outside that
column space (n > head size). Which was used is stated in ``Analysis.notes["effective_attention"]``.
"""

from __future__ import annotations

import torch

from ..core.errors import NormvizError
from . import papers
from .base import Budget, Inputs, KeyInfo, Output, Request, per_layer, refuse_over_budget
from .family import Family

FAMILY = Family(
    name="effective",
    order=50,
    keys=(
        KeyInfo(
            "effective_attention",
            "Effective attention",
            True,
            "α^h minus its projection on the left null space of T^h = x̂W^V_h(+b^V)W^O_h "
            "(Brunner et al. 2020); equals α when n ≤ head size. Option effective_value_bias=false: T without b^V.",
            short="effective α",
        ),
    ),
    unit="weight α",
    budget=Budget("effective"),  # option effective_budget_s
    heavy=True,  # costly: the public app computes it in the worker process (normviz.workers.process)
    references=(papers.BRUNNER_2020,),
)


def _work_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float32 if t.device.type == "mps" else torch.float64


def _reduce(t: torch.Tensor) -> torch.Tensor:
    """B [H, n, k] with T = B Qᵀ, Q orthonormal (QR of Tᵀ), k = min(n, d): same left singular vectors and
    singular values as T, so the SVDs below are of n×k instead of n×d matrices. B is lower-trapezoidal,
    hence the prefix T_{≤i} = B[:i+1] Qᵀ too."""
    _, r = torch.linalg.qr(t.transpose(-1, -2), mode="r")  # Tᵀ = Q R, R [H, k, n]
    return r.transpose(-1, -2)


def _project(alpha_rows: torch.Tensor, b: torch.Tensor, rtol: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """Project rows [..., n] onto the column space of b [..., n, k] (rank by s > rtol·s_max); rows of full
    rank (r = m, the number of rows of the prefix) are returned unchanged."""
    u, s, _ = torch.linalg.svd(b, full_matrices=False)
    smax = s[..., :1]
    keep = (s > rtol[..., None] * smax) & (smax > 0)
    r = keep.sum(-1)
    ur = u * keep[..., None, :].to(u.dtype)
    proj = torch.einsum("...n,...nk,...mk->...m", alpha_rows, ur, ur)
    return torch.where((r == m)[..., None], alpha_rows, proj)


def effective_attention(
    alpha: torch.Tensor,
    t: torch.Tensor | None,
    rtol: float | None = None,
    reduced: tuple[torch.Tensor, int] | None = None,
) -> torch.Tensor:
    """α̃ = α·U_rU_rᵀ per head. ``alpha`` [H, n, n], ``t`` [H, n, d] (T^h as rows); float64 inside.
    ``reduced=(B, d)`` passes a factor B with T = B·(orthonormal rows) instead of T."""
    if reduced is None:
        h, n, d = t.shape
        eps = torch.finfo(t.dtype).eps
        b = _reduce(t.to(_work_dtype(t)))
    else:
        b, d = reduced
        h, n, _ = b.shape
        eps = torch.finfo(b.dtype).eps
    tol = torch.full((h,), max(n, d) * eps if rtol is None else rtol, dtype=b.dtype, device=b.device)
    u, s, _ = torch.linalg.svd(b, full_matrices=False)
    out = alpha.to(b.dtype).clone()
    for head in range(h):
        smax = s[head, 0]
        r = int((s[head] > tol[head] * smax).sum()) if smax > 0 else 0
        if r < n:
            ur = u[head, :, :r]
            out[head] = (out[head] @ ur) @ ur.T
    return out.to(alpha.dtype)


def effective_attention_causal(
    alpha: torch.Tensor,
    t: torch.Tensor | None,
    rtol: float | None = None,
    chunk_bytes: int = 64 * 2**20,
    reduced: tuple[torch.Tensor, int] | None = None,
) -> torch.Tensor:
    """Causal version: row i projected onto the column space of its prefix T^h_{≤i}; [H, n, n]."""
    if reduced is None:
        h, n, d = t.shape
        eps = torch.finfo(t.dtype).eps
        b = _reduce(t.to(_work_dtype(t)))  # [H, n, k]
    else:
        b, d = reduced
        h, n, _ = b.shape
        eps = torch.finfo(b.dtype).eps
    k = b.shape[-1]
    a64 = alpha.to(b.dtype)
    out = a64.clone()
    # If the prefix of length m0 = min(n, k) has full rank in every head, so has every shorter prefix (the
    # smallest singular value of a row subset is ≥ the full one's, the largest ≤), and those rows keep α.
    m0 = min(n, k)
    s0 = torch.linalg.svdvals(b[:, :m0])
    tol0 = max(m0, d) * eps if rtol is None else rtol
    first = m0 if bool((s0[:, -1] > tol0 * s0[:, 0]).all()) else 0
    rows = torch.arange(n, device=b.device)
    step = max(1, chunk_bytes // max(1, 8 * h * n * k * 3))
    for start in range(first, n, step):
        idx = rows[start : start + step]  # receiving tokens i; prefix length m = i + 1
        m = idx + 1
        mask = (rows[None, :] < m[:, None]).to(b.dtype)  # [c, n]: rows of the prefix
        bp = b[None] * mask[:, None, :, None]  # [c, H, n, k], rows ≥ m zeroed
        ap = a64[:, idx, :].transpose(0, 1) * mask[:, None, :]  # [c, H, n]
        tol = (
            torch.clamp(m, min=d).to(b.dtype) * eps
            if rtol is None
            else torch.full((len(idx),), rtol, dtype=b.dtype, device=b.device)
        )
        proj = _project(ap, bp, tol[:, None].expand(-1, h), m[:, None].expand(-1, h))
        out[:, idx, :] = (proj * mask[:, None, :]).transpose(0, 1)  # nothing after i, exactly
    return out.to(alpha.dtype)


def _values64(ctx, value_bias: bool = True) -> torch.Tensor:
    """x̂ W^V_h + b^V_h (``value_bias=False``: without b^V_h) per head in float64 (float32 on mps, which has
    none), [H, n, head_dim] (KV heads repeated for GQA)."""
    p = ctx.p
    v = ctx.x_hat.to(ctx.acc) @ p.w_v.to(ctx.acc)
    if p.b_v is not None and value_bias:
        v = v + p.b_v.to(ctx.acc)
    v = v.reshape(ctx.n, p.n_kv_heads, p.head_dim).transpose(0, 1)
    if p.n_kv_heads != p.n_heads:
        v = v.repeat_interleave(p.n_heads // p.n_kv_heads, dim=0)
    return v


def reduced_factor(ctx, value_bias: bool = True) -> tuple[torch.Tensor, int]:
    """(B, d) with T^h = B^h Qᵀ, Q with orthonormal columns, B^h = V^h C^h [H, n, head_dim], where
    C^h C^hᵀ = W^O_h W^O_hᵀ (Cholesky; then C⁻¹W^O_h has orthonormal rows). B has T's left singular vectors
    and singular values at the cost of head_dim instead of d columns, and rank ≤ head size by construction.
    Falls back to the QR of Tᵀ when W^O_h is rank deficient."""
    v = _values64(ctx, value_bias)
    w = ctx.p.head_w_o().to(ctx.acc)  # [H, dh, d]
    c, info = torch.linalg.cholesky_ex(w @ w.transpose(-1, -2))
    d = w.shape[-1]
    if bool((info != 0).any()):
        return _reduce(torch.einsum("hnk,hkd->hnd", v, w)), d
    return v @ c, d


def head_vectors64(ctx, value_bias: bool = True) -> torch.Tensor:
    """T^h = (x̂ W^V_h + b^V_h) W^O_h computed in float64 from the model's weights and its own x̂, [H, n, d].

    In float64 the rank bound rank(T^h) ≤ head size holds to ~1e-16, so the default relative tolerance
    separates the true null space from small but real singular values also for float32 models (whose
    float32 T would carry rounding noise of ~1e-7 in every direction)."""
    return torch.einsum("hnk,hkd->hnd", _values64(ctx, value_bias), ctx.p.head_w_o().to(ctx.acc))


def _flag(value, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise NormvizError(f"{name}={value!r} is not a yes/no value; use true or false.")


def _options(options: dict) -> tuple[float | None, str, bool]:
    rtol = options.get("effective_rtol")
    mode = str(options.get("effective_causal", "prefix")).lower()
    if mode not in ("prefix", "full"):
        raise NormvizError(f"effective_causal={mode!r} is not known; use prefix (default) or full.")
    bias = _flag(options.get("effective_value_bias", True), "effective_value_bias")
    return (float(rtol) if rtol is not None else None), mode, bias


def compute(inputs: Inputs, keys, options) -> Output:
    rtol, mode, bias = _options(options)
    fn = effective_attention_causal if inputs.request.causal and mode == "prefix" else effective_attention
    arrays = per_layer(
        inputs,
        FAMILY.name,
        keys,
        lambda ctx: {"effective_attention": fn(ctx.alpha, None, rtol, reduced=reduced_factor(ctx, bias)).to(ctx.dtype)},
    )
    note = (
        "T^h = (x̂W^V_h + b^V_h)W^O_h, value bias inside (option effective_value_bias=true, the default)"
        if bias
        else "T^h = x̂W^V_h W^O_h, value bias left out (option effective_value_bias=false)"
    )
    return Output(arrays, {"effective_attention": note})


def check(request: Request, key: str, options: dict) -> None:
    """Refuse before anything runs when one SVD of an n × d matrix per layer and head (4·L·H·n·d·min(n, d) FLOPs) would
    take longer than option ``effective_budget_s``
    seconds (:func:`~normviz.methods.base.refuse_over_budget`)."""
    _options(options)
    refuse_over_budget(
        request,
        key,
        options,
        FAMILY.budget,
        lambda r: r.n_layers * 4.0 * r.n_heads * r.n_tokens * r.d_model * min(r.n_tokens, r.d_model),
    )
