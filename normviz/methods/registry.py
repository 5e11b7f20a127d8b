"""Registry of maps. Each method computes one or more keys with one call shape.

* ``scope="layer"``: ``compute(ctx, keys, options) -> {key: tensor}`` per layer, where ``ctx`` is a
  :class:`normviz.decompose.LayerDecomposition`; results are stacked over layers.
* ``scope="model"``: ``compute(arrays, info, keys, options) -> {key: ndarray}`` after all layers, from the
  stacked arrays of the keys it ``requires`` (e.g. rollout from per-layer maps).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import UnknownMethodError


@dataclass(frozen=True)
class KeyInfo:
    key: str
    title: str
    per_head: bool  # [L,H,n,n] when True, else [L,n,n]
    description: str
    placements: tuple[str, ...] = ("post", "pre")
    rows_sum_to_one: bool = False


@dataclass(frozen=True)
class Method:
    name: str
    keys: tuple[KeyInfo, ...]
    scope: str  # "layer" | "model"
    compute: Callable
    requires: tuple[str, ...] = ()
    opt_in: bool = False  # not computed unless asked for (costly)
    cost_note: str = ""
    # precheck(n_tokens, n_layers, options) runs before the forward pass and may raise TooCostlyError
    precheck: Callable | None = None
    references: tuple[str, ...] = field(default_factory=tuple)


_METHODS: dict[str, Method] = {}
_KEYS: dict[str, tuple[Method, KeyInfo]] = {}


def register(method: Method) -> Method:
    _METHODS[method.name] = method
    for info in method.keys:
        _KEYS[info.key] = (method, info)
    return method


def methods() -> dict[str, Method]:
    return dict(_METHODS)


def key_info(key: str) -> KeyInfo:
    return lookup(key)[1]


def lookup(key: str) -> tuple[Method, KeyInfo]:
    try:
        return _KEYS[key]
    except KeyError:
        raise UnknownMethodError(f"Unknown map {key!r}. Available maps: {', '.join(all_keys())}.") from None


def all_keys(placement: str | None = None, include_opt_in: bool = True) -> list[str]:
    out = []
    for key, (method, info) in _KEYS.items():
        if placement is not None and placement not in info.placements:
            continue
        if method.opt_in and not include_opt_in:
            continue
        out.append(key)
    return out
