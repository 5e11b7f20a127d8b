"""The one cost pre-flight of every costly computation (map families, ``explain``'s sources, ``routes``) and its
one table of rates.

    estimate  =  work(request) / rate (+ fixed seconds)   rate: work per second of the computation's cost model
                                                          on the device (:data:`RATES`: FLOP/s, or the routes'
                                                          parts scored per second)
    refused   when estimate > budget          budget: option ``<name>_budget_s`` seconds (:class:`Budget`)

A refusal says how long it would take, the budget and its option, and the longest input that fits
(:func:`token_limit`, when the cost is given as a function of the request). No budget, or a device without a
rate: no estimate, nothing refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..core.errors import TooCostlyError

# FLOP/s per cost model and device, measured on this 2-core CPU:
#   default      a rough rate (effective attention, ALTI, GlobEnc, value zeroing, routes).
#   decompx      DecompX and explain's sources (benchmarks/bench_decompx.py, minilm float32): 0.4–1.0e10 at
#                n = 32/128 while other processes loaded both cores (load average 7–9), 45 % of a plain GEMM of
#                the FF's shape timed alongside; 2e10 assumes a less busy machine but still errs on refusing.
#   feedforward  the FF maps (benchmarks/bench_ff.py): quiet, 100–136e9 (BERT-base, n = 32…512) and 60e9
#                (SmolLM2-shaped, gated); 18–23e9 while other processes load both cores. 5e10 lies between, so
#                that a busy public server errs on refusing rather than on running for minutes.
#   routes       not FLOP/s: numbers of the parts scored per second (memory-bound element work, two orders of
#                magnitude below a GEMM's FLOP rate), measured under load 9–14 (benchmarks/bench_routes.py
#                --estimate, smollm2 float32, docs/routes.md); each edge record adds its own seconds
#                (normviz.attribution.flow.EDGE_SECONDS)
# Other devices: no estimate unless the rate option is given.
RATES: dict[str, dict[str, float]] = {
    "default": {"cpu": 4e10},
    "decompx": {"cpu": 2e10},
    "feedforward": {"cpu": 5e10},
    "routes": {"cpu": 4e7},
}
# the option that overrides a cost model's rate (FLOP/s)
RATE_OPTIONS = {
    "default": "cost_flops_per_second",
    "decompx": "cost_flops_per_second",
    "feedforward": "ff_flops_per_second",
    "routes": "routes_numbers_per_second",
}


@dataclass(frozen=True)
class Budget:
    """A time budget: option ``<family>_budget_s`` (seconds; older names in ``aliases`` still read); ``rates``:
    its cost model in :data:`RATES`; ``setting``: the app's variable that sets it."""

    family: str
    aliases: tuple[str, ...] = ()
    rates: str = "default"
    setting: str = "NORMVIZ_COST_BUDGET"

    @property
    def option(self) -> str:
        return f"{self.family}_budget_s"

    def seconds(self, options: dict) -> float | None:
        for name in (self.option, *self.aliases):
            if options.get(name) is not None:
                return float(options[name])
        return None

    def named(self) -> str:
        return self.option + (f" (or {', '.join(self.aliases)})" if self.aliases else "")


def rate(kind: str, device: str, options: dict) -> float | None:
    """FLOP/s of cost model ``kind`` on ``device`` (its rate option wins), or None (no estimate)."""
    given = options.get(RATE_OPTIONS.get(kind, "cost_flops_per_second"))
    value = given or RATES[kind].get(device)
    return float(value) if value else None


def longest(fits: Callable[[int], bool], cap: int = 1 << 40) -> int:
    """The largest n for which ``fits(n)`` holds (``fits`` true up to some length, false beyond it; 0 when even
    1 does not fit), by doubling then bisecting; about ``cap`` at the most."""
    lo, hi = 0, 1
    while fits(hi) and hi < cap:
        lo, hi = hi, hi * 2
    while lo < hi - 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def token_limit(request, max_flops: float, cost: Callable) -> int:
    """The longest input whose ``cost(request with n tokens)`` (growing with n) stays within ``max_flops``."""
    return longest(lambda n: cost(type(request)(**{**request.__dict__, "n_tokens": n})) <= max_flops)


def estimate_s(
    request, options: dict, budget: Budget, flops: float | Callable, extra_s: Callable | None = None
) -> float | None:
    """Estimated seconds of ``flops`` (work in the cost model's units: a number or a function of the request) at
    the device's rate, plus ``extra_s(request)`` seconds (work not measured in the rate's units); None: no rate."""
    r = rate(budget.rates, request.device, options)
    if not r:
        return None
    total = flops(request) if callable(flops) else float(flops)
    return total / r + (float(extra_s(request)) if extra_s is not None else 0.0)


def refuse_over_budget(
    request,
    key: str,
    options: dict,
    budget: Budget | None,
    flops: float | Callable,
    note: str = "",
    extra_s: Callable | None = None,
) -> None:
    """Raise TooCostlyError when ``flops`` (a number, or a function of the request: then the message says how
    many tokens fit) at the device's rate (plus ``extra_s(request)`` seconds) would take longer than ``budget``
    (no limit by default; the app sets the budgets from its settings; None, a family that declares no budget:
    nothing refused). ``note``: a last sentence (what to use instead)."""
    if budget is None:
        return
    seconds = budget.seconds(options)
    r = rate(budget.rates, request.device, options)
    if seconds is None or not r:
        return
    est = estimate_s(request, options, budget, flops, extra_s)
    if est is None or est <= seconds:  # (never None here: the rate is known)
        return
    fits = ""
    if callable(flops):
        work = flops if extra_s is None else (lambda q: flops(q) + float(extra_s(q)) * r)
        fits = f" It fits the budget up to about {token_limit(request, seconds * r, work)} tokens here."
    raise TooCostlyError(
        f"{key} would take about {est:.0f} s for {request.n_tokens} tokens on this machine "
        f"(budget {seconds:.0f} s, option {budget.named()}; in the app {budget.setting}). "
        f"Shorten the text.{fits}" + (f" {note}" if note else "")
    )
