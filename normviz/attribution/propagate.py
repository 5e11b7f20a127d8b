"""Every input token's part of a logit, carried exactly through the whole network (``sources``, ``bias``).

Token k starts as its embedding output x^0_k (position embeddings included); all biases form one more part.
Each part goes through every component with the model's own α and norm scales — the norms' linear parts with
the real scale (their β to the bias part), attention (b^V and b^O to the bias part), residuals, and the FF block
split by integrated gradients from a zero baseline over all parts, the bias part included (element-wise
activations: the part's pre-activation × g(z)/z; SwiGLU silu(a)⊙b: a_k·b·∫₀¹t·silu′(ta)dt + b_k·∫₀¹silu(ta)dt
per unit) — then ⟨N(·), u⟩ at i through the readout (:mod:`normviz.attribution.readout`). Σ_k sources[k] + bias
is the model's logit (difference) exactly.

This is DecompX (Modarressi et al. 2023) with integrated gradients for the activations, the biases kept as
one part instead of split by |dot|, extended to gated FF blocks and GQA, and projected on the readout. The
propagation is DecompX's own (:func:`normviz.methods.decompx.propagate` with ``Rules("part")``).

Since issue 30 this is the **reference** of the tests and benchmarks, not the product path: ``Session.explain``
computes the same numbers by one backward pass through the same frozen coefficients
(:mod:`normviz.attribution.adjoint`, O(n·d) per layer instead of the parts' [n, n+1, d]).
"""

from __future__ import annotations

import torch

from ..methods import decompx


def output_parts(views, progress=None) -> torch.Tensor:
    """X^L [n, n+1, d]: every token's part (and the bias part, last) of the stack's last layer output."""
    X = None
    for X in decompx.decompx_vectors(views, progress, rules=decompx.BIAS_PART):
        pass
    return X


def source_logits(
    parts_i: torch.Tensor, readout, x_last: torch.Tensor, u: torch.Tensor, b: float
) -> tuple[torch.Tensor, float]:
    """(sources [n], bias) from the parts of x^L_i [n+1, d] (float64)."""
    out = readout.project_parts(parts_i.to(torch.float64), x_last, u, b)
    return out[:-1], float(out[-1])
