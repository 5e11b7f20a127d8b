"""Attention sinks: how much of each head's attention, and of what it moves, lands on the first token.

Per layer l and head h, over the receiving rows i (Kobayashi et al. 2020's [CLS]/[SEP] finding; the decoders'
"attention sink"):

    share_α[l, h]   = mean_i  α^h_i0 / Σ_j α^h_ij
    share_‖αf‖[l, h] = mean_i  α^h_i0 ‖f^h_0‖ / Σ_j α^h_ij ‖f^h_j‖      (f^h_j = v^h_j W^O_h, b^O excluded)

— the same numbers as the share of the ``attention`` and ``norm`` maps' first column (``norm`` = α^h_ij ‖f^h_j‖),
a row whose sum is 0 counting as 0. Computed one layer at a time from the session's records: the layer's α
(recorded, or recomputed from q, k in blocks of rows for a long input) and its [H, n] vector norms, in the
layer's working dtype; the shares are summed in float64. Never an [L, H, n, n] array: the peak is one block
of α (a long input) or the recorded α itself, plus O(H·n).
"""

from __future__ import annotations

import numpy as np
import torch

from ..core.errors import NormvizError, NotApplicableError
from .base import Budget, Request
from .cost import rate as cost_rate
from .cost import refuse_over_budget

BLOCK_BYTES = 32 << 20  # α per block of rows (a long input's recomputed α)
BUDGET = Budget("sinks")  # option sinks_budget_s
ALPHA_OPS = 150  # per α element besides q·k: the eager softmax, mask, the two shares (memory-bound)
TOKEN_OPS = 16  # per token and d²: q, k recomputed by rerunning the layer, v, ‖v W^O‖


def flops(request: Request) -> float:
    """Per layer n²·(2d + ALPHA_OPS·H) + TOKEN_OPS·n·d²: fitted to the CPU seconds measured on smollm2 at
    n = 900 and 1800 at the default rate (benchmarks/bench_why_sinks.py: 4.9 and 12.9 CPU s), not a count."""
    n, d = request.n_tokens, request.d_model
    return request.n_layers * (n * n * (2.0 * d + ALPHA_OPS * request.n_heads) + TOKEN_OPS * n * d * d)


def estimate_s(request: Request, options: dict) -> float:
    """The seconds :func:`first_token_shares` is expected to take at the device's rate (0: no rate known)."""
    rate = cost_rate(BUDGET.rates, request.device, options)
    return flops(request) / rate if rate else 0.0


def check(request: Request, options: dict) -> None:
    """:class:`~normviz.core.errors.TooCostlyError` when the shares would exceed ``sinks_budget_s``."""
    refuse_over_budget(request, "The attention sinks", options, BUDGET, flops)


def first_token_shares(
    session, stack: str | None = None, block_bytes: int = BLOCK_BYTES
) -> tuple[np.ndarray, np.ndarray]:
    """(share_α [L, H], share_‖αf‖ [L, H]) of ``session``'s self-attention ``stack`` (default its first), see
    the module's docstring. Raises :class:`~normviz.core.errors.NormvizError` for a layer whose record holds
    neither α nor what recomputes it."""
    views = session.layers(stack)
    wa, wn = [], []
    with session.store.lock:  # the views' cached tensors are shared with the session's other work
        for view in views:
            try:
                a, b = _layer_shares(view, block_bytes)
            finally:
                view.clear()
            wa.append(a)
            wn.append(b)
    return np.stack(wa), np.stack(wn)


def learned_sinks(session, stack: str | None = None, block_bytes: int = BLOCK_BYTES) -> np.ndarray:
    """The learned sinks' share [L, H, n] of a model whose attention has them (GPT-OSS, ``ArchSpec.attn_sinks``):
    per layer, head and receiving token i, σ^h_i = exp(s_h) / (exp(s_h) + Σ_j exp(e^h_ij)) = 1 − Σ_j α^h_ij, the
    part of the softmax that the head's sink logit s_h takes and no token receives (float64).
    One layer at a time from the records, as :func:`first_token_shares`. Raises
    :class:`~normviz.core.errors.NotApplicableError` for a model without learned sinks (its rows sum to 1)."""
    spec = getattr(session.lm, "spec", None)
    if getattr(spec, "attn_sinks", None) is None:
        raise NotApplicableError(
            f"learned_sinks: {getattr(spec, 'family', 'this model')} has no learned attention sinks "
            "(each row of α sums to 1); first_token_shares gives the share on the first token."
        )
    out = []
    with session.store.lock:
        for view in session.layers(stack):
            try:
                out.append(1.0 - _row_sums(view, block_bytes))
            finally:
                view.clear()
    return np.stack(out)


def _row_sums(view, block_bytes: int) -> np.ndarray:
    """Σ_j α^h_ij [H, n] of one layer, in float64 (α recorded, or recomputed in blocks of rows)."""
    rec = view.rec
    if rec.attn is not None:
        return rec.attn.to(torch.float64).sum(-1).numpy()
    sums = [block.to(torch.float64).sum(-1) for _, _, _, block in rec.attention_inputs().blocks(block_bytes)]
    return torch.cat(sums, dim=1).numpy()


def _layer_shares(view, block_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """One layer's (share_α [H], share_‖αf‖ [H])."""
    rec = view.rec
    fnorm = _vector_norms(view)  # [H, n]
    H, n = fnorm.shape
    sa = torch.zeros(H, dtype=torch.float64)
    sn = torch.zeros(H, dtype=torch.float64)
    if rec.attn is not None:
        blocks = [(0, n, n, rec.attn)]
    elif rec.qk is not None:
        blocks = rec.attention_inputs().blocks(block_bytes)
    else:
        raise NormvizError(
            f"Layer {view.index}'s record holds no attention weights (nor q, k to recompute "
            "them): record the session again with option record_attention='weights' or 'qk'."
        )
    for _, _, cols, block in blocks:
        block = block.to(view.dtype)
        sa += _row_shares(block[..., 0], block.sum(-1))
        moved = torch.bmm(block, fnorm[:, :cols, None]).squeeze(-1)  # Σ_j α_ij ‖f_j‖ [H, rows]
        sn += _row_shares(block[..., 0] * fnorm[:, :1], moved)
        del block, moved
    return (sa / n).numpy(), (sn / n).numpy()


def _row_shares(first: torch.Tensor, total: torch.Tensor) -> torch.Tensor:
    """Σ over rows of first / total (0 where total is 0), per head, in float64."""
    ok = total > 0
    share = torch.where(ok, first / torch.where(ok, total, torch.ones_like(total)), torch.zeros_like(total))
    return share.to(torch.float64).sum(-1)


def _vector_norms(view) -> torch.Tensor:
    """‖f^h_j‖ = ‖v^h_j W^O_h‖ [H, n], one head at a time (never the [H, n, d] head vectors at once)."""
    values, w_o = view.head_values, view.p.head_w_o().to(view.dtype)
    return torch.stack([torch.linalg.vector_norm(values[h] @ w_o[h], dim=-1) for h in range(values.shape[0])])


__all__ = ["BUDGET", "check", "estimate_s", "first_token_shares", "flops", "learned_sinks"]
