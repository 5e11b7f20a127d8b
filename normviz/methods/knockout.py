"""Attention knockout (ground truth, computed by :func:`normviz.attribution.knockout.knockout`): each source
token's attention edges into every other position blocked in every layer and head, n + 1 forward passes' worth
of work (batched). Registered as a family so that its budget (option ``knockout_budget_s``), cost check and
paper are listed with every other family's; it computes no map key (it answers a question about one
prediction: ``Session.knockout``)."""

from __future__ import annotations

from ..core.errors import NotApplicableError
from .base import Budget, Request, refuse_over_budget
from .family import Family

FAMILY = Family(
    name="knockout",
    order=120,
    keys=(),
    budget=Budget("knockout"),
    needs_model=True,
    references=(
        "Geva, Bastings, Filippova & Globerson 2023, Dissecting Recall of Factual Associations in "
        "Auto-Regressive Language Models (attention knockout)",
    ),
)


def forward_flops(request: Request) -> float:
    """Floating-point operations of one forward pass over ``request.n_tokens`` tokens (weights and attention)."""
    n, d, ff = request.n_tokens, request.d_model, request.d_ff
    per_token = 2.0 * (4 * d * d + (3 if request.gated else 2) * d * ff) + 4.0 * n * d
    return request.n_layers * n * per_token


def check(request: Request, key: str, options: dict) -> None:
    """TooCostlyError when n + 1 forward passes would exceed ``knockout_budget_s``; runs nothing."""
    refuse_over_budget(request, key, options, FAMILY.budget, (request.n_tokens + 1) * forward_flops(request))


def compute(inputs, keys, options):
    raise NotApplicableError("knockout computes no map key: call Session.knockout(token, foil, position).")
