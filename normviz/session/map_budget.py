"""A session's whole arrays against the memory budget, known before anything runs (:mod:`normviz.core.memory`).

shape(key)   [L, H, rows, cols] per head, else [L, rows, cols] (the cross stack's columns: the encoder's)
bytes        L·(H·)rows·cols × the working dtype's size (float32 for half-precision models)
refused      the keys whose arrays, with what the session holds, would pass option ``memory_budget_mb``
"""

from __future__ import annotations

import functools

from .. import methods as registry
from ..core import memory
from ..core.errors import NormvizError
from ..methods import keyspace
from ..record.decompose import working_dtype


@functools.lru_cache(maxsize=None)
def _itemsize(dtype) -> int:
    import torch

    return torch.empty((), dtype=dtype).element_size()


def itemsize(lm) -> int:
    """Bytes per map value of ``lm``: the working dtype's."""
    return _itemsize(working_dtype(lm.dtype))


def array_shape(session, key: str) -> tuple[int, ...]:
    """The shape of ``key``'s whole array for ``session``'s input, known before computing."""
    stack, base = keyspace.parse(key)
    request = session.request_of(stack)
    cols = session.n_tokens if stack == "cross" else request.n_tokens
    return memory.shape_of(registry.base_info(base).per_head, request.n_layers, request.n_heads, request.n_tokens, cols)


def held_bytes(session) -> int:
    """What ``session``'s whole arrays hold now."""
    return session.store.held_bytes


def over_budget(session, wanted: list[str], strict: bool) -> dict[str, NormvizError]:
    """Keys whose whole arrays would not fit the memory budget (with what the session holds): raised at once
    (``strict``) or refused one by one (the first that fit are kept), before anything runs."""
    budget = memory.budget_mb(session.options)
    todo = [k for k in dict.fromkeys(wanted) if k not in session.store.arrays]
    if budget is None or not todo:
        return {}
    shapes = {k: array_shape(session, k) for k in todo}
    size = itemsize(session.lm)
    sizes = {k: memory.nbytes(shapes[k], size) for k in todo}
    held, limit = held_bytes(session), budget * 2**20
    if held + sum(sizes.values()) <= limit:
        return {}
    n = session.request.n_tokens
    if strict:
        raise memory.over_budget_error(todo, sum(sizes.values()), held, budget, n, shapes)
    refused, used = {}, held
    for k in todo:
        if used + sizes[k] > limit:
            refused[k] = memory.over_budget_error([k], sizes[k], used, budget, n, shapes)
        else:
            used += sizes[k]
    return refused
