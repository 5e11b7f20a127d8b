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

Cost: the parts are [n, n+1, d] per layer; :func:`flops` counts the projections through W^V, W^O and the FF
matrices and the attention mixing; :func:`check` refuses above the option ``explain_budget_s`` (seconds), or
parts over ``explain_max_bytes`` of memory, before anything runs.
"""
from __future__ import annotations

import torch

from ..errors import TooCostlyError
from ..methods import decompx
from ..methods.base import Request
from ..methods.cost import Budget, refuse_over_budget
from ..methods.family import Family
from ..methods.registry import register_computation

MAX_BYTES = 2 * 2**30  # the parts X and their values, by default
BUDGET = Budget("explain", rates="decompx")  # option explain_budget_s, at DecompX's measured rate


def flops(request: Request) -> float:
    """Multiply-adds ×2 per layer: n(n+1) parts through W^V and W^O (≈ d×d each), the FF matrices (2 or 3 of
    d×d_ff) and the attention mixing over n²(n+1)·d."""
    n, d, d_ff = request.n_tokens, request.d_model, request.d_ff
    m = n + 1
    ff = (3 if request.gated else 2) * d_ff
    return request.n_layers * (2.0 * n * m * d * (2 * d + ff) + 2.0 * n * n * m * d)


def memory_bytes(request: Request, itemsize: int = 4) -> int:
    """The parts X and their value projection: 2·n·(n+1)·d numbers."""
    return 2 * request.n_tokens * (request.n_tokens + 1) * request.d_model * itemsize


def check(request: Request, options: dict, itemsize: int = 4) -> None:
    """TooCostlyError when ``sources`` would exceed the time budget (option ``explain_budget_s``, at
    DecompX's measured rate) or the memory limit (option ``explain_max_bytes``, default 2 GiB)."""
    limit = int(options.get("explain_max_bytes", MAX_BYTES))
    need = memory_bytes(request, itemsize)
    if need > limit:
        raise TooCostlyError(f"sources for {request.n_tokens} tokens needs about {need / 2**30:.1f} GiB for the "
                             f"propagated parts (limit {limit / 2**30:.1f} GiB, option explain_max_bytes). "
                             "Shorten the text; the direct parts (heads, ff …) need no such memory.")
    refuse_over_budget(request, "sources", options, BUDGET, flops,
                       note="The direct parts (heads, ff …) cost about one forward pass.")


register_computation(Family(name="explain", keys=(), check=check, compute=None, budget=BUDGET))


def output_parts(views, progress=None) -> torch.Tensor:
    """X^L [n, n+1, d]: every token's part (and the bias part, last) of the stack's last layer output."""
    X = None
    for X in decompx.decompx_vectors(views, progress, rules=decompx.BIAS_PART):
        pass
    return X


def source_logits(parts_i: torch.Tensor, readout, x_last: torch.Tensor, u: torch.Tensor, b: float
                  ) -> tuple[torch.Tensor, float]:
    """(sources [n], bias) from the parts of x^L_i [n+1, d] (float64)."""
    out = readout.project_parts(parts_i.to(torch.float64), x_last, u, b)
    return out[:-1], float(out[-1])
