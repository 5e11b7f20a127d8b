"""The registry of map families (modules, see :mod:`normviz.methods.base`) and of the map keys they compute.

Keys here are a stack's own names (``norm``, ``cross_norm``); :mod:`normviz.keyspace` spells them per stack
(``encoder_norm``) and resolves, checks and lists them for a loaded model."""
from __future__ import annotations

import dataclasses
from types import ModuleType

from .. import settings
from ..errors import NotApplicableError, TooCostlyError, UnknownKeyError
from .base import DEFAULT_STACKS, DEFAULT_UNIT, GROUPS, KeyInfo, Request

_FAMILIES: dict[str, ModuleType] = {}
_KEYS: dict[str, tuple[ModuleType, KeyInfo]] = {}

_REQUIRED = ("NAME", "KEYS", "check", "compute")

# older family names a user may have typed (keys=["decomposition"]): family names are module names now
FAMILY_ALIASES = {"global_encoder": "globenc", "decomposition": "decompx"}


def _completed(module: ModuleType, info: KeyInfo) -> KeyInfo:
    """``info`` with the fields it leaves to its family filled in (stacks, group, unit, budget option)."""
    budget = getattr(module, "BUDGET", None)
    group = info.group or getattr(module, "GROUP", GROUPS[2])
    if group not in GROUPS:
        raise ValueError(f"{info.key}: group {group!r} is not one of {', '.join(GROUPS)}")
    return dataclasses.replace(
        info, group=group, unit=info.unit or getattr(module, "UNIT", DEFAULT_UNIT),
        stacks=tuple(info.stacks or getattr(module, "STACKS", DEFAULT_STACKS)),
        budget_option=info.budget_option or (budget.option if budget is not None else None))


def register_family(module: ModuleType) -> ModuleType:
    """Add a family module (NAME, KEYS, REQUIRES, NEEDS_RECORDS, NEEDS_MODEL, OPT_IN, REFERENCES, STACKS, GROUP,
    UNIT, BUDGET, check, compute). Its keys are offered on every stack they apply to (:mod:`normviz.keyspace`).
    A family's name may be one of its own keys' (``decompx``), never another family's key."""
    missing = [a for a in _REQUIRED if not hasattr(module, a)]
    if missing:
        raise TypeError(f"{module.__name__} is not a map family: it lacks {', '.join(missing)}")
    own = {i.key for i in module.KEYS}
    clash = [i.key for i in module.KEYS if i.key in _FAMILIES or (i.key in _KEYS and _KEYS[i.key][0] is not module)]
    if clash or (module.NAME in _KEYS and module.NAME not in own) or module.NAME in FAMILY_ALIASES:
        raise ValueError(f"family name {module.NAME!r} and key names must differ ({', '.join(clash) or module.NAME})")
    _FAMILIES[module.NAME] = module
    module.KEYS = tuple(_completed(module, i) for i in module.KEYS)
    for info in module.KEYS:
        _KEYS[info.key] = (module, info)
        if info.budget_option:  # its time budget becomes a declared option (normviz.settings)
            settings.declare_budget(info.budget_option.removesuffix("_budget_s"))
    budget = getattr(module, "BUDGET", None)
    if budget is not None:  # a family without map keys (the interventions) has its budget too
        settings.declare_budget(budget.family)
    for alias in getattr(budget, "aliases", ()):
        settings.declare_budget(budget.family, alias=alias)
    return module


def unregister_family(name: str) -> None:
    """Remove a family and its keys (a user's experiment, a test's)."""
    module = _FAMILIES.pop(name, None)
    if module is not None:
        for info in module.KEYS:
            if _KEYS.get(info.key, (None,))[0] is module:
                del _KEYS[info.key]


def families() -> dict[str, ModuleType]:
    return dict(_FAMILIES)


def family(name: str) -> ModuleType | None:
    """The family called ``name`` (or an older name of it), or None."""
    return _FAMILIES.get(FAMILY_ALIASES.get(name, name))


def family_of(key: str) -> ModuleType:
    return lookup(key)[0]


def key_info(key: str) -> KeyInfo:
    return lookup(key)[1]


def lookup(key: str) -> tuple[ModuleType, KeyInfo]:
    try:
        return _KEYS[key]
    except KeyError:
        raise UnknownKeyError(f"Unknown map key {key!r}. Map keys: {', '.join(all_keys(stack=None))}.") from None


def is_key(key: str) -> bool:
    return key in _KEYS


def requires(key: str) -> tuple[str, ...]:
    family = family_of(key)
    return tuple(getattr(family, "REQUIRES", {}).get(key, ()))


def is_opt_in(key: str) -> bool:
    return key in getattr(family_of(key), "OPT_IN", ())


def all_keys(placement: str | None = None, include_opt_in: bool = True, stack: str | None = "model") -> list[str]:
    """Registered keys (a stack's own names) of one stack (default: a self-attention model's; None: every
    stack's), optionally of one placement. For a loaded model: :func:`normviz.keyspace.all_keys` (every key it
    offers, spelled per stack)."""
    out = []
    for key, (family, info) in _KEYS.items():
        if placement is not None and placement not in info.placements:
            continue
        if stack is not None and stack not in info.stacks:
            continue
        if not include_opt_in and key in getattr(family, "OPT_IN", ()):
            continue
        out.append(key)
    return out


def check(request: Request, key: str, options: dict) -> None:
    """Applicability (the key's stacks and placements) and the family's own check; raises per key."""
    family, info = lookup(key)
    if request.stack not in info.stacks:
        raise NotApplicableError(f"{key!r} applies to the {'/'.join(info.stacks)} stack(s), not the {request.stack}.")
    if request.placement not in info.placements:
        try:  # the family may say more precisely why (and what to use instead)
            family.check(request, key, options)
        except TooCostlyError:
            pass
        raise NotApplicableError(
            f"{key!r} applies to {'/'.join(info.placements)}-LN models only; this model is {request.placement}-LN.")
    family.check(request, key, options)


def budget_option(key: str) -> str | None:
    """The option (seconds) whose budget ``key``'s cost check reads: ``<family>_budget_s``, or None."""
    return key_info(key).budget_option


def budget_options() -> list[str]:
    """Every family's budget option, once each (e.g. for a deployment that sets them all), also those of families
    without map keys (the interventions, :mod:`normviz.methods.knockout`)."""
    keyed = (i.budget_option for _, i in _KEYS.values() if i.budget_option)
    keyless = (f.BUDGET.option for f in _FAMILIES.values() if getattr(f, "BUDGET", None) is not None and not f.KEYS)
    return list(dict.fromkeys([*keyed, *keyless]))


def references() -> dict[str, tuple[str, ...]]:
    """Family name → the papers it implements."""
    return {name: tuple(getattr(f, "REFERENCES", ())) for name, f in _FAMILIES.items()}
