"""The registry of map families and of the map keys they compute.

A family is registered as a module (see :mod:`normviz.methods.base`), kept as one typed record
(:class:`~normviz.methods.family.Family`: every optional attribute's default declared there once). Keys here are
a stack's own names (``norm``, ``cross_norm``); :mod:`normviz.methods.keyspace` spells them per stack (``encoder_norm``)
and resolves, checks and lists them for a loaded model. Computations with a cost budget that are not map
families (``explain``'s sources, ``routes``: :mod:`normviz.attribution`) are registered as records too
(:func:`register_computation`), so that every budget is listed in one place (:func:`all_budget_options`)."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from types import ModuleType

from ..core import settings
from ..core.errors import NotApplicableError, TooCostlyError, UnknownKeyError
from .base import KeyInfo, Request
from .family import Family

_FAMILIES: dict[str, Family] = {}
_KEYS: dict[str, tuple[Family, KeyInfo]] = {}
_COMPUTATIONS: dict[str, Family] = {}

_REQUIRED = ("NAME", "KEYS", "check", "compute")

# older family names a user may have typed (keys=["decomposition"]): family names are module names now
FAMILY_ALIASES = {"global_encoder": "globenc", "decomposition": "decompx"}


def _completed(family: Family, info: KeyInfo) -> KeyInfo:
    """``info`` with the fields it leaves to its family filled in (stacks, group, unit, budget option)."""
    from .base import GROUPS

    group = info.group or family.group
    if group not in GROUPS:
        raise ValueError(f"{info.key}: group {group!r} is not one of {', '.join(GROUPS)}")
    return dataclasses.replace(
        info,
        group=group,
        unit=info.unit or family.unit,
        stacks=tuple(info.stacks or family.stacks),
        budget_option=info.budget_option or (family.budget.option if family.budget is not None else None),
    )


def register_family(module: ModuleType) -> ModuleType:
    """Add a family module, kept as its :class:`Family` record: its ``FAMILY`` (the built-ins), or NAME, KEYS,
    check, compute and the optional attributes of :mod:`normviz.methods.base` (a user's own module). Its keys are
    offered on every stack they apply to (:mod:`normviz.methods.keyspace`). A family's name may be one of its own
    keys' (``decompx``), never another family's key."""
    required = ("check", "compute") if "FAMILY" in vars(module) else _REQUIRED
    missing = [a for a in required if not hasattr(module, a)]
    if missing:
        raise TypeError(f"{module.__name__} is not a map family: it lacks {', '.join(missing)}")
    record = Family.of(module)
    own = {i.key for i in record.keys}
    clash = [
        i.key for i in record.keys if i.key in _FAMILIES or (i.key in _KEYS and _KEYS[i.key][0].module is not module)
    ]
    if clash or (record.name in _KEYS and record.name not in own) or record.name in FAMILY_ALIASES:
        raise ValueError(f"family name {record.name!r} and key names must differ ({', '.join(clash) or record.name})")
    record = dataclasses.replace(record, keys=tuple(_completed(record, i) for i in record.keys))
    _FAMILIES[record.name] = record
    for info in record.keys:
        _KEYS[info.key] = (record, info)
        if info.budget_option:  # its time budget becomes a declared option (normviz.core.settings)
            settings.declare_budget(info.budget_option.removesuffix("_budget_s"))
    budget = record.budget
    if budget is not None:  # a family without map keys (the interventions) has its budget too
        settings.declare_budget(budget.family)
        for alias in budget.aliases:
            settings.declare_budget(budget.family, alias=alias)
    return module


def register_package(package: ModuleType) -> list[Family]:
    """Register every module of ``package`` (a folder) that declares a ``FAMILY``, in the records' ``order``
    (then name): the built-ins are found by listing :mod:`normviz.methods`, not by a hand-kept list."""
    found = []
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if isinstance(vars(module).get("FAMILY"), Family):
            found.append(module)
    found.sort(key=lambda m: (m.FAMILY.order, m.FAMILY.name))
    for module in found:
        register_family(module)
    return [_FAMILIES[m.FAMILY.name] for m in found]


def register_computation(record: Family) -> Family:
    """Add a computation with a cost budget that is not a map family (no keys): ``explain``'s sources,
    ``routes``. Its ``check(request, options)`` is its cost pre-flight."""
    _COMPUTATIONS[record.name] = record
    return record


def computation(name: str) -> Family:
    return _COMPUTATIONS[name]


def all_budget_options() -> list[str]:
    """Every budget option: the families' (:func:`budget_options`) and the other computations' (``explain``,
    ``routes``), once each (the app sets them all from its cost budget)."""
    return list(dict.fromkeys(budget_options() + [c.budget.option for c in _COMPUTATIONS.values() if c.budget]))


def unregister_family(name: str) -> None:
    """Remove a family and its keys (a user's experiment, a test's)."""
    record = _FAMILIES.pop(name, None)
    if record is not None:
        for info in record.keys:
            if _KEYS.get(info.key, (None,))[0] is record:
                del _KEYS[info.key]


def families() -> dict[str, Family]:
    return dict(_FAMILIES)


def family(name: str) -> Family | None:
    """The family called ``name`` (or an older name of it), or None."""
    return _FAMILIES.get(FAMILY_ALIASES.get(name, name))


def family_of(key: str) -> Family:
    return lookup(key)[0]


def base_info(key: str) -> KeyInfo:
    """The KeyInfo of a stack's own key (``norm``, ``cross_norm``); a spelled key (``encoder_norm``): the public
    :func:`normviz.methods.keyspace.key_info`."""
    return lookup(key)[1]


def lookup(key: str) -> tuple[Family, KeyInfo]:
    try:
        return _KEYS[key]
    except KeyError:
        raise UnknownKeyError(f"Unknown map key {key!r}. Map keys: {', '.join(all_keys(stack=None))}.") from None


def is_key(key: str) -> bool:
    return key in _KEYS


def requires(key: str) -> tuple[str, ...]:
    return tuple(family_of(key).requires.get(key, ()))


def is_opt_in(key: str) -> bool:
    return key in family_of(key).opt_in


def all_keys(placement: str | None = None, include_opt_in: bool = True, stack: str | None = "model") -> list[str]:
    """Registered keys (a stack's own names) of one stack (default: a self-attention model's; None: every
    stack's), optionally of one placement. For a loaded model: :func:`normviz.methods.keyspace.all_keys` (every key it
    offers, spelled per stack)."""
    out = []
    for key, (family, info) in _KEYS.items():
        if placement is not None and placement not in info.placements:
            continue
        if stack is not None and stack not in (info.stacks or ()):
            continue
        if not include_opt_in and key in family.opt_in:
            continue
        out.append(key)
    return out


def check(request: Request, key: str, options: dict) -> None:
    """Applicability (the key's stacks and placements) and the family's own check; raises per key."""
    family, info = lookup(key)
    stacks = info.stacks or ()  # filled in at registration (_completed)
    if request.stack not in stacks:
        raise NotApplicableError(f"{key!r} applies to the {'/'.join(stacks)} stack(s), not the {request.stack}.")
    if request.placement not in info.placements:
        try:  # the family may say more precisely why (and what to use instead)
            family.check(request, key, options)
        except TooCostlyError:
            pass
        raise NotApplicableError(
            f"{key!r} applies to {'/'.join(info.placements)}-LN models only; this model is {request.placement}-LN."
        )
    family.check(request, key, options)


def budget_option(key: str) -> str | None:
    """The option (seconds) whose budget ``key``'s cost check reads: ``<family>_budget_s``, or None."""
    return base_info(key).budget_option


def budget_options() -> list[str]:
    """Every family's budget option, once each (e.g. for a deployment that sets them all), also those of families
    without map keys (the interventions, :mod:`normviz.methods.knockout`)."""
    keyed = (i.budget_option for _, i in _KEYS.values() if i.budget_option)
    keyless = (f.budget.option for f in _FAMILIES.values() if f.budget is not None and not f.keys)
    return list(dict.fromkeys([*keyed, *keyless]))


def references() -> dict[str, tuple[str, ...]]:
    """Family name → the papers it implements."""
    return {name: f.references for name, f in _FAMILIES.items()}


def layer_view(key: str) -> str | None:
    """The key whose layer map is ``key``'s "all heads" view (a stack's own names: ``norm`` → ``norm_layer``,
    ``cross_norm`` → ``cross_norm_layer``), declared by its family (:attr:`Family.layer_views`); None: the head
    mean (``attention``, every per-head key without one), and for keys that are not per head."""
    family, info = lookup(key)
    return (family.layer_views or {}).get(key) if info.per_head else None
