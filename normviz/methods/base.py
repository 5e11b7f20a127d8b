"""What every map family module exposes, and what it is given.

A family is one module under ``normviz/methods/`` with

    NAME        the family's name (never a map key's name)
    KEYS        tuple of :class:`KeyInfo`: the map keys it computes
    REQUIRES    {key: (keys it needs computed first)}; e.g. a rollout needs its per-layer map
    NEEDS_MODEL whether ``compute`` reruns parts of the live model (then ``inputs.model`` is given)
    HOOKS_OWN_THREAD (optional) True: its hooks act only in their own thread (``normviz.record.owner_only``),
                so the session need not hold the model's lock while it runs (otherwise it does)
    OPT_IN      keys not computed unless asked for by name (costly)
    COMPUTED_TOGETHER  (optional) True: the session computes every applicable key of the family at once
    REFERENCES  the papers, for the Learn page and the docs

    check(request, key, options)     before any forward pass: raise NotApplicableError or TooCostlyError
    compute(inputs, keys, options)   -> Output(arrays {key: numpy [L, …]}, notes {key: text})

``compute`` never mutates its inputs. The recorded layers (``inputs.layers``) are recorded on first access:
a family that reads only other maps (a rollout) never causes a forward pass. :func:`normviz.methods.registry.register_family` adds a module
(also a user's own).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from ..errors import TooCostlyError


@dataclass(frozen=True)
class KeyInfo:
    key: str
    title: str
    per_head: bool  # [L,H,n,n] when True, else [L,n,n]
    description: str
    placements: tuple[str, ...] = ("post", "pre")


@dataclass(frozen=True)
class Request:
    """What is known before the forward pass: the input's size and the model's shape."""

    n_tokens: int
    n_layers: int
    n_heads: int
    d_model: int
    d_ff: int
    placement: str  # "post" | "pre"
    causal: bool
    gated: bool  # SwiGLU feed-forward
    device: str  # "cpu", "cuda", …


@dataclass
class Inputs:
    """What ``compute`` receives."""

    request: Request
    layer_views: Callable[[], Sequence]  # -> one normviz.decompose.LayerDecomposition per layer
    arrays: Mapping[str, np.ndarray]  # maps computed before (at least the REQUIRES of the keys asked for)
    model: object | None = None  # the LoadedModel, only for NEEDS_MODEL families
    progress: Callable[[float, str], None] | None = None  # (fraction of this family's work, message)

    @property
    def layers(self) -> Sequence:
        """The per-layer views of the records (the recording pass runs on the session's first access)."""
        return self.layer_views()

    def layer_done(self, family: str, index: int) -> None:
        if self.progress:
            self.progress((index + 1) / len(self.layers), f"{family}: layer {index + 1}/{len(self.layers)}")


@dataclass
class Output:
    arrays: dict[str, np.ndarray]
    notes: dict[str, str] = field(default_factory=dict)


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu").numpy()


def per_layer(inputs: Inputs, family: str, keys: Sequence[str],
              fn: Callable[[object], Mapping[str, torch.Tensor]]) -> dict[str, np.ndarray]:
    """Stack ``fn(layer) -> {key: tensor}`` over the layers into numpy arrays [L, …] (allocated once); each
    layer's cached tensors are dropped when it is done."""
    out: dict[str, np.ndarray] = {}
    L = len(inputs.layers)
    for index, ctx in enumerate(inputs.layers):
        res = fn(ctx)
        for k in keys:
            value = to_numpy(res[k])
            if k not in out:
                out[k] = np.empty((L,) + value.shape, dtype=value.dtype)
            out[k][index] = value
        ctx.clear()
        inputs.layer_done(family, index)
    return out


COST_FLOPS_PER_SECOND = {"cpu": 4e10}  # a rough rate for the estimates below (option cost_flops_per_second)


def refuse_over_budget(request: Request, key: str, options: dict, budget_option: str, flops: float) -> None:
    """Raise TooCostlyError when ``flops`` at the device's rate would take longer than ``options[budget_option]``
    seconds (the app sets these budgets from NORMVIZ_COST_BUDGET; no limit by default; devices without a
    rate: no estimate)."""
    budget = options.get(budget_option)
    rate = options.get("cost_flops_per_second") or COST_FLOPS_PER_SECOND.get(request.device)
    if budget is None or not rate:
        return
    est = flops / float(rate)
    if est > float(budget):
        raise TooCostlyError(f"{key} would take about {est:.0f} s for {request.n_tokens} tokens on this machine "
                             f"(budget {float(budget):.0f} s, option {budget_option}; in the app NORMVIZ_COST_BUDGET). "
                             "Shorten the text.")


def no_check(request: Request, key: str, options: dict) -> None:
    """For families that apply to every supported model and are never too costly."""
    return None
