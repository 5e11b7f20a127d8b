"""The registry of map families (modules, see :mod:`normviz.methods.base`) and of the map keys they compute."""
from __future__ import annotations

from types import ModuleType

from ..errors import NotApplicableError, TooCostlyError, UnknownMethodError
from .base import KeyInfo, Request

_FAMILIES: dict[str, ModuleType] = {}
_KEYS: dict[str, tuple[ModuleType, KeyInfo]] = {}

_REQUIRED = ("NAME", "KEYS", "check", "compute")


def register_family(module: ModuleType) -> ModuleType:
    """Add a family module (NAME, KEYS, REQUIRES, NEEDS_RECORDS, NEEDS_MODEL, OPT_IN, REFERENCES, check, compute)."""
    missing = [a for a in _REQUIRED if not hasattr(module, a)]
    if missing:
        raise TypeError(f"{module.__name__} is not a map family: it lacks {', '.join(missing)}")
    clash = [i.key for i in module.KEYS if i.key == module.NAME or i.key in _FAMILIES]
    if clash or module.NAME in _KEYS:
        raise ValueError(f"family name {module.NAME!r} and key names must differ ({', '.join(clash) or module.NAME})")
    _FAMILIES[module.NAME] = module
    for info in module.KEYS:
        _KEYS[info.key] = (module, info)
    return module


def families() -> dict[str, ModuleType]:
    return dict(_FAMILIES)


def family_of(key: str) -> ModuleType:
    return lookup(key)[0]


def key_info(key: str) -> KeyInfo:
    return lookup(key)[1]


def lookup(key: str) -> tuple[ModuleType, KeyInfo]:
    try:
        return _KEYS[key]
    except KeyError:
        raise UnknownMethodError(f"Unknown map key {key!r}. Map keys: {', '.join(all_keys())}.") from None


def requires(key: str) -> tuple[str, ...]:
    family = family_of(key)
    return tuple(getattr(family, "REQUIRES", {}).get(key, ()))


def is_opt_in(key: str) -> bool:
    return key in getattr(family_of(key), "OPT_IN", ())


def all_keys(placement: str | None = None, include_opt_in: bool = True) -> list[str]:
    out = []
    for key, (family, info) in _KEYS.items():
        if placement is not None and placement not in info.placements:
            continue
        if not include_opt_in and key in getattr(family, "OPT_IN", ()):
            continue
        out.append(key)
    return out


def check(request: Request, key: str, options: dict) -> None:
    """Applicability (the key's placements) and the family's own check; raises per key."""
    family, info = lookup(key)
    if request.placement not in info.placements:
        try:  # the family may say more precisely why (and what to use instead)
            family.check(request, key, options)
        except TooCostlyError:
            pass
        raise NotApplicableError(
            f"{key!r} applies to {'/'.join(info.placements)}-LN models only; this model is {request.placement}-LN.")
    family.check(request, key, options)


def references() -> dict[str, tuple[str, ...]]:
    """Family name → the papers it implements."""
    return {name: tuple(getattr(f, "REFERENCES", ())) for name, f in _FAMILIES.items()}
