"""What every map family module exposes, and what it is given.

A family is one module under ``normviz/methods/``. A built-in one declares one frozen record,
``FAMILY = Family(name=..., keys=..., ...)`` (:class:`normviz.methods.family.Family`: the fields below in lower
case, their defaults declared there once; ``order``: where its keys are listed), and its ``check`` and ``compute``
functions. A user's own module (:func:`normviz.register_family`) may instead declare the upper-case attributes:

    NAME        the family's name (never a map key's name)
    KEYS        tuple of :class:`KeyInfo`: the map keys it computes
    REQUIRES    {key: (keys it needs computed first)}; e.g. a rollout needs its per-layer map
    NEEDS_MODEL whether ``compute`` reruns parts of the live model (then ``inputs.model`` is given)
    HOOKS_OWN_THREAD (optional) True: its hooks act only in their own thread (``normviz.record.recorder.owner_only``),
                so the session need not hold the model's lock while it runs (otherwise it does)
    OPT_IN      keys not computed unless asked for by name (costly)
    STACKS      (optional) the stacks its keys apply to (default ``("model", "encoder")``: a self-attention
                model's layers and an encoder–decoder's encoder; ``"decoder"``: its decoder's self-attention;
                ``"cross"``: its cross-attention blocks), see :mod:`normviz.methods.keyspace`
    GROUP       (optional) the picker group of its keys (:data:`GROUPS`; default "alternatives")
    UNIT        (optional) what one cell's number is, for colour bars (default ‖vector‖)
    BUDGET      (optional) a :class:`~normviz.methods.cost.Budget`: its cost check reads option
                ``<NAME>_budget_s`` (seconds) through :func:`~normviz.methods.cost.refuse_over_budget`
    COMPUTED_TOGETHER  (optional) True: the session computes every applicable key of the family at once
    PER_LAYER   (optional) True: ``compute`` serves any subset of the layers (each layer's maps from its own
                record alone), so ``Session.map(key, layer)`` computes that one layer
    RECORD      (optional) ``"attention"``: ``compute`` reads only the attention blocks' records (x, α, v,
                z_attn, the layer's call), so when every family of a ``get()`` says so the recording pass may
                stop after the last layer's attention block (its ``out``, ``z_ff``, ``final`` are then None;
                any later family without it records again, fully); default ``"full"``
    LAYER_VIEWS (optional) {per-head key: the key that is its "all heads" layer map}; default: each per-head
                key's own ``<key>_layer`` when the family has one (``norm`` → ``norm_layer``), else the head mean
    ALPHA_KEYS  (optional) keys whose layer map is the layer view's α itself (the weights family's
                ``attention``): the one-layer path takes one head or the head mean from it directly
    RELEASES_ALPHA (optional) True: ``compute`` drops each layer's α once copied, so on one layer view the
                other families run first (:mod:`normviz.session.layer_maps`)
    chain_source(key, options) (optional) the per-layer key whose layer maps ``key``'s layer l multiplies, one
                [n, n] product at a time (``one_at_a_time``: the rollouts), or None when the whole array is needed
    REFERENCES  the papers, for the Learn page and the docs

    check(request, key, options)     before any forward pass: raise NotApplicableError or TooCostlyError
    compute(inputs, keys, options)   -> Output(arrays {key: numpy [L, …]}, notes {key: text})

``compute`` never mutates its inputs. The recorded layers (``inputs.layers``) are recorded on first access:
a family that reads only other maps (a rollout) never causes a forward pass.
:func:`normviz.methods.registry.register_family` adds a module
(also a user's own).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from .cost import Budget, refuse_over_budget  # noqa: F401  (the one cost pre-flight, for families)

GROUPS = ("per layer", "across layers", "alternatives")  # Kobayashi et al.'s per-layer maps | chained | others
DEFAULT_STACKS = ("model", "encoder")
DEFAULT_UNIT = "‖vector‖ (hidden-state units)"


@dataclass(frozen=True)
class KeyInfo:
    """Everything the rest of the code knows about a map key. Fields left None are filled by
    :func:`normviz.methods.registry.register_family` from the family (STACKS, GROUP, UNIT, BUDGET)."""

    key: str
    title: str
    per_head: bool  # [L,H,n,n] when True, else [L,n,n]
    description: str  # one line: the caption of its figures
    placements: tuple[str, ...] = ("post", "pre")
    group: str | None = None  # the picker's group (GROUPS)
    short: str | None = None  # a label that fits a pill (None: the title, cut)
    unit: str | None = None  # what one cell's number is (colour bars); "a (b)" may be broken before "("
    stacks: tuple[str, ...] | None = None  # the stacks it applies to (normviz.methods.keyspace)
    budget_option: str | None = None  # the option its cost check reads (None: no time budget)

    @property
    def label(self) -> str:
        """The short label, or the title cut to 22 characters."""
        t = self.short or self.title
        return t if len(t) <= 22 else t[:21] + "…"


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
    stack: str = "model"  # whose layers (normviz.methods.keyspace): "model", "encoder", "decoder", "cross"
    ff_refusal: str | None = None  # why the FF block cannot be split exactly here (its activation), or None


@dataclass
class Inputs:
    """What ``compute`` receives."""

    request: Request
    layer_views: Callable[[], Sequence]  # -> one normviz.record.decompose.LayerDecomposition per layer
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


def per_layer(
    inputs: Inputs, family: str, keys: Sequence[str], fn: Callable[[object], Mapping[str, torch.Tensor]]
) -> dict[str, np.ndarray]:
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


# a costly call's deadline: DEADLINE_FACTOR × its cost budget (the estimates are rough), else DEFAULT_DEADLINE_S
# (read by the heavy-maps worker and by routes' cooperative deadline)
DEADLINE_FACTOR = 4.0
DEFAULT_DEADLINE_S = 600.0


def no_check(request: Request, key: str, options: dict) -> None:
    """For families that apply to every supported model and are never too costly."""
    return None
