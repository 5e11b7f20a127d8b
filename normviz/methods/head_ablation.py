"""Head ablation (ground truth, computed by :func:`normviz.attribution.knockout.ablate_heads`): each head's
output before W^O set to zero (or its corpus mean) at every position, L·H + 1 forward passes' worth of work
(batched). Registered as a family so that its budget (option ``head_ablation_budget_s``), cost check and papers
are listed with every other family's; it computes no map key (``Session.ablate_heads``)."""

from __future__ import annotations

from ..core.errors import NotApplicableError
from .base import Budget, Request, refuse_over_budget
from .family import Family
from .knockout import forward_flops

FAMILY = Family(
    name="head_ablation",
    order=130,
    keys=(),
    budget=Budget("head_ablation"),
    needs_model=True,
    references=(
        "Michel, Levy & Neubig 2019, Are Sixteen Heads Really Better than One? (zero ablation of heads)",
        "Wang, Variengien, Conmy, Shlegeris & Steinhardt 2023, Interpretability in the Wild (mean ablation)",
    ),
)


def check(request: Request, key: str, options: dict) -> None:
    """TooCostlyError when L·H + 1 forward passes would exceed ``head_ablation_budget_s``; runs nothing."""
    count = request.n_layers * request.n_heads + 1
    refuse_over_budget(request, key, options, FAMILY.budget, count * forward_flops(request))


def compute(inputs, keys, options):
    raise NotApplicableError("head_ablation computes no map key: call Session.ablate_heads(token, foil, position).")
