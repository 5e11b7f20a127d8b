"""One layer of a map without its whole [L, …] array: ``Session.map``, ``maps`` and ``layer_stack``.

    key ─ whole array computed? ─► its layer (the "all heads" view: :func:`normviz.methods.keyspace.layer_view`)
        ─ family.chained (a rollout, standard normalisation) ─► R_l = step(M_l)·R_{l−1}, one [n, n] at a time
        ─ not family.per_layer ─► the whole array through Session.get
        ─ else ─► that layer's records: a long input's layer with α streamed in row blocks
                  (:mod:`normviz.methods.long_layer`), or every family's keys on the one layer view
                  (α's head mean / one head taken from the view itself for a family's ``alpha_keys``; a family
                  that ``releases_alpha`` runs last on the view)

Every layer computed is checked first (applicability, cost for one layer) and kept in the session's bounded
cache (option ``map_cache_mb``; a long layer within ``long_map_cache_mb``): (spelled key, layer) for a layer's
array, (key, layer, take) for a derived [rows, cols] view (a head mean, one head of a layer too big to keep).
What the path may do with a family is read from its record (:class:`normviz.methods.family.Family`), never from
its name.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

import numpy as np

from .. import methods as registry
from ..core import memory
from ..core.errors import NormvizError
from ..methods import keyspace
from ..methods.base import Inputs, to_numpy
from . import map_budget


def index(value: int, size: int, what: str, key: str) -> int:
    if not -size <= value < size:
        raise NormvizError(f"{what} {value} is out of range: {key} has {size} {what}s (0…{size - 1}).")
    return value % size


def whole_layer(arr: np.ndarray, key: str, layer: int, head: int | None) -> np.ndarray:
    """One layer of a whole array: [rows, cols] of a per-layer key, one head, or (``head=None``, a per-head key
    without an "all heads" key of its own) the head mean."""
    layer = index(layer, arr.shape[0], "layer", key)
    if arr.ndim == 3:
        return arr[layer]
    if head is None:
        return arr[layer].mean(0)
    return arr[layer, index(head, arr.shape[1], "head", key)]


def maps(session, keys: Iterable[str], layer: int, head: int | None = None) -> dict[str, np.ndarray]:
    """{key: one [rows, cols] map of ``layer``} (:meth:`normviz.session.session.Session.maps`)."""
    keys = list(dict.fromkeys(keys))
    asked = {}  # key -> the key whose layer map answers it (a per-head key's "all heads" view is another key's)
    for key in keys:
        view = keyspace.layer_view(key) if head is None else None
        asked[key] = view or key
    got = _maps(session, list(dict.fromkeys(asked.values())), layer, head)
    return {k: got[asked[k]] for k in keys}


def _maps(session, keys: list[str], layer: int, head: int | None) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    todo: dict[str, tuple] = {}  # key -> (stack, base to compute, layer, what to take of it)
    for key in keys:
        stack, base = keyspace.parse(key)
        if stack not in session.stacks:  # e.g. "norm" on an encoder–decoder: the refusal names its keys
            keyspace.check(session.lm, stack, base, session.request, session.options)
        info, family = registry.base_info(base), registry.family_of(base)
        if key in session.store.arrays:
            out[key] = whole_layer(session.store.arrays[key], key, layer, head)
            continue
        source = family.module.chain_source(base, session.options) if family.chained else None
        if source is not None:
            out[key] = _chained_layer(session, stack, base, source, layer)
            continue
        if not family.per_layer:
            out[key] = session.get([key]).map(key, layer, head)
            continue
        request = session.request_of(stack)
        li = index(layer, request.n_layers, "layer", key)
        if info.per_head:
            take = "mean" if head is None else index(head, request.n_heads, "head", key)
            todo[key] = (stack, base, li, take)
        else:
            todo[key] = (stack, base, li, None)
    cache = session.store.layer_maps
    derived = {k: cache.get((k, t[2], t[3])) for k, t in todo.items() if t[3] is not None}
    groups: dict[tuple, list[str]] = {}
    direct: dict[tuple, dict[str, object]] = {}  # α's head mean or one head, taken from the layer view itself
    for k, (stack, base, li, take) in todo.items():
        if derived.get(k) is not None:
            continue
        if take is not None and stack != "cross" and base in registry.family_of(base).alpha_keys:
            direct.setdefault((stack, li), {})[k] = take
            groups.setdefault((stack, li), [])
        else:
            groups.setdefault((stack, li), []).append(base)
    for g in list(groups):  # a long input's layer: α streamed in row blocks through every map it feeds
        got = _streamed(
            session, g[0], g[1], {k: t for k, t in todo.items() if (t[0], t[2]) == g and derived.get(k) is None}
        )
        if got is not None:
            out.update(got)
            del groups[g]
            direct.pop(g, None)
            todo = {k: t for k, t in todo.items() if k not in got}
    layers = {
        g: _layers(session, g[0], list(dict.fromkeys(bases)), g[1], direct.get(g, {})) for g, bases in groups.items()
    }
    for k, (stack, base, li, take) in todo.items():
        if derived.get(k) is not None:
            out[k] = derived[k]
            continue
        if k in direct.get((stack, li), {}):
            out[k] = layers[(stack, li)][k][0]
            continue
        arr, kept = layers[(stack, li)][base]
        if take is None:
            out[k] = arr
        elif take == "mean":
            out[k] = arr.mean(0)
            cache.put((k, li, take), out[k])
        else:
            out[k] = arr[take] if kept else arr[take].copy()
            if not kept:  # the whole layer did not fit the cache: keep the one head shown
                cache.put((k, li, take), out[k])
    return out


def layer_stack(session, key: str, layer: int) -> np.ndarray:
    """Every head of one layer of ``key``: [H, rows, cols], or [1, rows, cols] for layer-level keys
    (:meth:`normviz.session.session.Session.layer_stack`)."""
    stack, base = keyspace.parse(key)
    info, family = registry.base_info(base), registry.family_of(base)
    worker = session.worker is not None and session.worker.takes(session, family, [key])
    if key in session.store.arrays or not family.per_layer or worker:
        arr = session.get([key])[key]
        li = index(layer, arr.shape[0], "layer", key)
        return arr[li] if arr.ndim == 4 else arr[li][None]
    if not info.per_head:
        return session.map(key, layer)[None]
    li = index(layer, session.request_of(stack).n_layers, "layer", key)
    return _layers(session, stack, [base], li)[base][0]


def _chained_layer(session, stack: str, base: str, source: str, layer: int) -> np.ndarray:
    """R_layer of a chained key (a rollout) with one [n, n] product at a time from ``source``'s layer maps (each
    through :func:`maps`, so cached and bounded), resuming from the deepest R_k already in the cache."""
    family = registry.family_of(base)
    key = keyspace.spell(stack, base)
    request = session.request_of(stack)
    layer = index(layer, request.n_layers, "layer", key)
    keyspace.check(session.lm, stack, base, request, session.options)
    first, start = 0, None
    for k in range(layer, -1, -1):
        hit = session.store.layer_maps.get((key, k))
        if hit is not None:
            if k == layer:
                return hit
            first, start = k + 1, hit.astype(np.float64)
            break
    source = keyspace.spell(stack, source)
    dtype = np.dtype(np.float32 if map_budget.itemsize(session.lm) == 4 else np.float64)
    out = None
    acc = start
    for k in range(first, layer + 1):
        acc = family.module.one_at_a_time(base, lambda i: session.map(source, i), acc, k, k)
        out = acc.astype(dtype)
        session.store.layer_maps.put((key, k), out)
    return out


def _streamed(session, stack: str, layer: int, todo: dict[str, tuple]) -> dict[str, np.ndarray] | None:
    """``todo`` {key: (stack, base, layer, take)} of one layer computed with α streamed in row blocks
    (:mod:`normviz.methods.long_layer`: a long input's layer, never its whole α), each cached as (spelled base,
    layer) or (key, layer, take); None when that path does not serve them all (the caller then computes them on
    the layer view)."""
    from ..methods import long_layer

    if stack == "cross" or not todo:
        return None
    cache = session.store.layer_maps
    got, want, hits = {}, {}, {}
    for k, (_, base, _, take) in todo.items():
        ck = (keyspace.spell(stack, base), layer) if take is None else (k, layer, take)
        hit = cache.get(ck)
        if hit is not None:
            got[k], hits[ck] = hit, hit
        else:
            want[k] = (base, take, ck)
    if not want:
        return got
    with session.store.lock:
        view = session.layers(stack)[layer]
        wanted = list(dict.fromkeys((b, t) for b, t, _ in want.values()))
        if not long_layer.streamable(view, wanted):
            return None
        one = dataclasses.replace(session.request_of(stack), n_layers=1)
        for b in dict.fromkeys(b for b, _ in wanted):
            keyspace.check(session.lm, stack, b, one, session.options)  # applicability, and cost for one layer
        # room first (never the cache full and the new layer at once), within the long-input bound; the layer's
        # own cached maps (a head change keeps its layer-level maps) are put back after it
        cache.reserve(
            len(wanted) * view.n * view.n * map_budget.itemsize(session.lm),
            float(session.options.get("long_map_cache_mb", memory.LONG_MAP_CACHE_MB)) * 2**20,
        )
        try:
            arrays = long_layer.layer_maps(view, wanted)
        finally:
            view.clear()
    for ck, hit in hits.items():  # this layer's maps found in the cache: kept as its newest entries
        cache.put(ck, hit)
    for k, (base, take, ck) in want.items():
        cache.put(ck, arrays[(base, take)])
        got[k] = arrays[(base, take)]
    return got


def _layers(
    session, stack: str, bases: list[str], layer: int, alpha_views: dict[str, object] | None = None
) -> dict[str, tuple[np.ndarray, bool]]:
    """{base: (layer ``layer`` of it on ``stack`` ([H, n, n] or [n, n]), whether the cache kept it)}, from the
    cache or computed: every missing one checked first (applicability, cost for one layer), then all computed on
    the same layer view (one family call per family) before its derived tensors are dropped. ``alpha_views``
    {key: "mean" or a head}: α's head mean or one head taken from the same view's α (what the family of an
    ``alpha_keys`` key would copy whole, [H, n, n], to then keep one [n, n] of it), cached as (key, layer, take)
    and returned under ``key``."""
    cache = session.store.layer_maps
    got = {}
    for b in bases:
        hit = cache.get((keyspace.spell(stack, b), layer))
        if hit is not None:
            got[b] = (hit, True)
    missing = [b for b in bases if b not in got]
    alpha_views = alpha_views or {}
    if not missing and not alpha_views:
        return got
    one = dataclasses.replace(session.request_of(stack), n_layers=1)
    for b in dict.fromkeys(missing + [keyspace.parse(k)[1] for k in alpha_views]):
        keyspace.check(session.lm, stack, b, one, session.options)  # applicability, and cost for one layer
    by_family: dict[str, list[str]] = {}
    for b in missing:
        by_family.setdefault(registry.family_of(b).name, []).append(b)
    families = registry.families()
    with session.store.lock:
        view = session.layers(stack)[layer]
        try:
            # α's views first: a family's run clears the view's derived tensors (α included) when done, and α
            # would be recomputed (half of a long layer's CPU time at smollm2's n = 4000)
            for k, take in alpha_views.items():
                alpha = view.alpha
                from ..methods import long_layer

                arr = to_numpy(long_layer.head_mean(alpha) if take == "mean" else alpha[int(take)])
                cache.put((k, layer, take), arr)
                got[k] = (arr, True)
            # a family that drops each layer's α once copied (its whole-array path) goes last, so that the
            # others' runs on this view use the same α
            for name, bs in sorted(by_family.items(), key=lambda item: families[item[0]].releases_alpha):
                inputs = Inputs(request=one, layer_views=lambda: [view], arrays={}, model=None, progress=None)
                res = families[name].compute(inputs, bs, {**session.options, "compute_together": False})
                for b in bs:
                    arr = res.arrays[b][0]
                    cache.put((keyspace.spell(stack, b), layer), arr)
                    got[b] = (arr, cache.get((keyspace.spell(stack, b), layer)) is arr)
        finally:
            view.clear()
    return got
