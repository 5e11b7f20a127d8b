"""Per-pair norms ‖Σ_h α^h_ij f^h_j‖ from per-token Gram matrices, without building any per-pair vector.

With G_j[h, h'] = ⟨f^h_j, f^h'_j⟩ (or the inner product under a norm layer's linear part),

    ‖Σ_h α^h_ij f^h_j‖² = Σ_h Σ_h' α^h_ij α^h'_ij G_j[h, h'] = α_ijᵀ G_j α_ij,

so every pair costs H(H+1)/2 multiply-adds on numbers already at hand. The contributing token j indexes
both α's last axis and G, so the sum vectorises over j in α's own [H, n, n] layout: no transpose, no
[n, n, H]-sized temporary.

Two implementations of the same formula:
  * a compiled CPU kernel (:mod:`.kernels`, driven by :mod:`.runs`; rows in parallel,
    j innermost) — the default on CPU;
  * :func:`pair_norms_torch` (batched over j) — on GPU/mps, and wherever numba is missing.
Both are tested against each other and against per-pair vectors built explicitly.
"""

from __future__ import annotations

import torch


def pair_norms_torch(alpha: torch.Tensor, gram: torch.Tensor, scale: torch.Tensor, out: torch.Tensor) -> None:
    """The formula batched over j with torch: y_ji = α_ji G_j, q_ji = ⟨y_ji, α_ji⟩ (any device)."""
    a = alpha.permute(2, 1, 0)  # [j, i, h]
    q = (torch.bmm(a, gram) * a).sum(-1)  # [j, i]
    out.copy_(q.clamp_min(0).sqrt().T * scale[:, None])
