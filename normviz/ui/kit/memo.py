"""Per-rerun work done once: results kept beside the object they are derived from.

A rerun that only moves the layer slider redrew every panel from scratch: ``data.shown_matrix`` of each map,
the frames of every layer for the browser (``ui/frames.py``) and ``fx.transformed_norms`` for the ‖f(x)‖
strip, each visitor on each rerun (together ~30 % of the server's samples under load). They depend only on
a computed map (or the session) and the view's drawing options, so :func:`memoised` keeps them in a
weak-keyed table of that owner: a session's map array (the same object for every visitor of the same text,
whatever Analysis wraps it) or the session. They go when the owner goes (the session cache evicts it), and at
most ``LIMIT`` results and ``MAX_BYTES`` of arrays and strings are kept per owner (the one
:class:`normviz.core.cache.BoundedCache`, least recently used out first: a
visitor clicking through every position of the Why page's logit lens, 6 MB each on smollm2, cannot grow it). Cached
arrays are read-only, so a caller that
would change one in place fails loudly instead of changing another visitor's view.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

from ...core.cache import BoundedCache

LIMIT = 512
MAX_BYTES = 96 << 20  # per owner
_MEMO: dict[int, tuple] = {}  # id(owner) -> (weak reference to it, BoundedCache of its results)
_LOCK = threading.RLock()  # re-entrant: an owner may die (and _drop run) while it is held


def _drop(key: int) -> None:
    with _LOCK:
        _MEMO.pop(key, None)


def frozen(value):
    """``value`` with every numpy array in it (top level, tuples, lists, dict values) made read-only."""
    if isinstance(value, np.ndarray):
        value.setflags(write=False)
    elif isinstance(value, (tuple, list)):
        for v in value:
            frozen(v)
    elif isinstance(value, dict):
        for v in value.values():
            frozen(v)
    return value


_NESTED = (np.ndarray, str, bytes, tuple, list, dict)


def size_of(value) -> int:
    """Bytes held by the numpy arrays and strings in ``value`` (top level, tuples, lists, dict values); a list
    of plain values (numbers, None: a frame's row) counts 8 bytes per item, without visiting each."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (str, bytes)):
        return len(value)
    if isinstance(value, (tuple, list)):
        if value and not isinstance(value[0], _NESTED):
            return 8 * len(value)
        return sum(size_of(v) for v in value)
    if isinstance(value, dict):
        return sum(size_of(v) for v in value.values())
    return 0


def memoised(owner, key, compute):
    """``compute()`` once per (``owner``, ``key``); ``owner`` must be weak-referenceable (a numpy array, a
    Session). Two threads may both compute a missing value (the same numbers); one of them is kept."""
    with _LOCK:
        entry = _MEMO.get(id(owner))
        if entry is None or entry[0]() is not owner:  # new, or a dead owner's id reused
            try:
                entry = (weakref.ref(owner), BoundedCache(LIMIT, MAX_BYTES, size_of))
            except TypeError:  # not weak-referenceable: no memo
                entry = None
            else:
                _MEMO[id(owner)] = entry
                weakref.finalize(owner, _drop, id(owner))
        if entry is not None and key in entry[1]:
            return entry[1].get(key)
    if entry is None:
        return compute()
    table = entry[1]
    value = frozen(compute())
    with _LOCK:
        if key in table:  # another thread computed it meanwhile: keep theirs
            return table.get(key)
        table.put(key, value)  # one bigger than MAX_BYTES is not kept: computed again when asked again
    return value


def stats() -> dict:
    """How many owners and results are kept (for tests and benchmarks)."""
    with _LOCK:
        return {"owners": len(_MEMO), "results": sum(len(e[1]) for e in _MEMO.values())}
