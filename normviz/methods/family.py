"""One frozen record per registered family (:class:`Family`): what a family declares, with every optional field's
default declared here only, so that the session, the worker, the key space and the pages read fields
(``family.per_layer``) instead of ``getattr(module, "PER_LAYER", False)`` each with its own default.

A built-in family module declares one value, ``FAMILY = Family(name=..., keys=..., ...)``: a misspelt or unknown
field is a TypeError when the module is imported (the dataclass refuses it), a bad ``record`` or ``group`` a
ValueError there. Its ``check`` and ``compute`` stay module functions: registration binds the record to its module
(:meth:`Family.of`), and they are read from the module at call time (so a patch of the module's function is seen).
``normviz.methods`` registers every module of the package that declares a ``FAMILY``, in ``order``.

A user's own module may still declare the upper-case attributes of :mod:`normviz.methods.base` (``NAME``, ``KEYS``
…, :func:`normviz.register_family`); :meth:`Family.of` reads them once, with the same defaults. An upper-case
attribute that is a misspelling of a declared one (``PER_LAYERS`` for ``PER_LAYER``) is an error there, not silently
ignored (``tests/unit/test_family_record.py``). Nothing is written into a module.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Callable, Mapping

from .base import DEFAULT_STACKS, DEFAULT_UNIT, GROUPS, KeyInfo
from .cost import Budget

RECORDS = ("full", "attention")  # what compute() reads of the recording pass

# the upper-case attributes a family module declares (with NAME, KEYS, check, compute), each one field's source
DECLARED = (
    "NAME",
    "KEYS",
    "REQUIRES",
    "OPT_IN",
    "NEEDS_MODEL",
    "HOOKS_OWN_THREAD",
    "HEAVY",
    "PER_LAYER",
    "RECORD",
    "COMPUTED_TOGETHER",
    "STACKS",
    "GROUP",
    "UNIT",
    "BUDGET",
    "LAYER_VIEWS",
    "ALPHA_KEYS",
    "RELEASES_ALPHA",
    "REFERENCES",
)


def misspelt(module: ModuleType) -> dict[str, str]:
    """{an upper-case attribute of ``module``: the declared attribute it is a misspelling of} (``PER_LAYERS`` →
    ``PER_LAYER``); a family's own constants that resemble no declared name are its business."""
    out = {}
    for name in vars(module):
        if name.isupper() and name not in DECLARED and not name.startswith("_"):
            close = difflib.get_close_matches(name, DECLARED, n=1, cutoff=0.9)
            if close:
                out[name] = close[0]
    return out


@dataclass(frozen=True)
class Family:
    """A map family (or a computation with a cost budget: ``explain``'s sources, ``routes``) as the rest of the
    code sees it: frozen; ``check`` and ``compute`` are the module's, read at call time."""

    name: str
    keys: tuple[KeyInfo, ...]
    module: ModuleType | None = None  # the family's module (bound at registration): its check and compute
    own_check: Callable[..., Any] | None = None  # a computation without a module: its cost pre-flight
    order: int = 1000  # where a built-in family's keys are listed (all_keys, the pickers, the docs): lowest first
    requires: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    opt_in: tuple[str, ...] = ()
    needs_model: bool = False  # compute() reruns parts of the live model (inputs.model is given)
    hooks_own_thread: bool = False  # its hooks act only in their own thread: no model lock needed
    heavy: bool = False  # costly: a session's heavy-methods worker computes it (normviz.workers.process)
    per_layer: bool = False  # compute() serves any subset of layers: Session.map computes one layer
    record: str = "full"  # "attention": reads only the attention blocks (a pass may stop early)
    computed_together: bool = False  # its applicable keys are computed at once
    stacks: tuple[str, ...] = DEFAULT_STACKS
    group: str = GROUPS[2]
    unit: str = DEFAULT_UNIT
    budget: Budget | None = None
    # per-head key -> its "all heads" key; None (not declared): each per-head key's own <key>_layer when the
    # family has one (norm → norm_layer, cross_norm → cross_norm_layer: the heads' vectors summed, then the norm),
    # else none (the head mean). Always a mapping once built.
    layer_views: Mapping[str, str] | None = None
    # what the one-layer path (normviz.session.layer_maps) may do with the family, instead of asking for it by name:
    alpha_keys: tuple[str, ...] = ()  # keys whose layer map is the view's α itself (a head or the mean taken there)
    releases_alpha: bool = False  # its per-layer run drops the view's α: run after the others on the same view
    chained: bool = False  # some keys' layer l is a product over layers ≤ l of another key's maps: chain_source()
    references: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.record not in RECORDS:
            raise ValueError(f"{self.name}: RECORD {self.record!r} is not one of {', '.join(RECORDS)}")
        if self.group not in GROUPS:
            raise ValueError(f"{self.name}: group {self.group!r} is not one of {', '.join(GROUPS)}")
        keys = tuple(self.keys)
        object.__setattr__(self, "keys", keys)
        views = self.layer_views
        if views is None:
            names = {i.key for i in keys}
            views = {i.key: i.key + "_layer" for i in keys if i.per_head and i.key + "_layer" in names}
        object.__setattr__(self, "layer_views", dict(views))

    @classmethod
    def of(cls, module: ModuleType) -> "Family":
        """The record of a family module, bound to it: its declared ``FAMILY`` (the built-ins), or one read from
        its upper-case attributes (a user's module; the defaults of every optional attribute are this class's)."""
        declared = vars(module).get("FAMILY")
        if declared is not None:
            if not isinstance(declared, Family):
                raise TypeError(f"{module.__name__}.FAMILY is a {type(declared).__name__}, not a Family")
            both = [a for a in vars(module) if a in DECLARED]
            if both:
                raise TypeError(
                    f"{module.__name__} declares FAMILY and {', '.join(both)}: the record is the declaration"
                )
            return replace(declared, module=module, chained=callable(getattr(module, "chain_source", None)))
        wrong = misspelt(module)
        if wrong:
            raise TypeError(
                f"{module.__name__}: unknown family attribute(s) "
                + ", ".join(f"{k} (did you mean {v}?)" for k, v in wrong.items())
            )
        return cls(
            name=module.NAME,
            keys=tuple(module.KEYS),
            module=module,
            requires=dict(getattr(module, "REQUIRES", {})),
            opt_in=tuple(getattr(module, "OPT_IN", ())),
            needs_model=bool(getattr(module, "NEEDS_MODEL", False)),
            hooks_own_thread=bool(getattr(module, "HOOKS_OWN_THREAD", False)),
            heavy=bool(getattr(module, "HEAVY", False)),
            per_layer=bool(getattr(module, "PER_LAYER", False)),
            record=getattr(module, "RECORD", cls.record),
            computed_together=bool(getattr(module, "COMPUTED_TOGETHER", False)),
            stacks=tuple(getattr(module, "STACKS", DEFAULT_STACKS)),
            group=getattr(module, "GROUP", cls.group),
            unit=getattr(module, "UNIT", DEFAULT_UNIT),
            budget=getattr(module, "BUDGET", None),
            layer_views=getattr(module, "LAYER_VIEWS", None),
            alpha_keys=tuple(getattr(module, "ALPHA_KEYS", ())),
            releases_alpha=bool(getattr(module, "RELEASES_ALPHA", False)),
            chained=callable(getattr(module, "chain_source", None)),
            references=tuple(getattr(module, "REFERENCES", ())),
        )

    @property
    def check(self) -> Callable[..., Any]:
        fn = self.own_check if self.module is None else self.module.check
        if fn is None:
            raise TypeError(f"{self.name} has no check")
        return fn

    @property
    def compute(self) -> Callable[..., Any] | None:
        return None if self.module is None else getattr(self.module, "compute", None)
