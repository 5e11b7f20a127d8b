"""The one bounded cache: key → value, least recently used out first, bounded by a count of entries and/or by
bytes; thread-safe. Every bounded cache of the package is one of these: the app's models and sessions
(:mod:`normviz.ui.kit.stores`), a session's per-layer maps (:class:`normviz.core.memory.LayerCache`, by bytes),
the per-owner memo of the pages (:mod:`normviz.ui.kit.memo`, by count and bytes) and the worker's models and kept
sessions (:mod:`normviz.workers.process`).

A value alone larger than ``max_bytes`` is not kept (it is computed again when asked again). ``get`` and ``put``
make an entry the most recent; :meth:`reserve` makes room before a value is computed.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Container, Hashable

_MISSING = object()


def _nbytes(value: Any) -> int:
    return int(getattr(value, "nbytes", 0))


class BoundedCache:
    """``max_entries`` (None: no count bound) and ``max_bytes`` (None: no byte bound; ``size(value)`` counts a
    value's bytes, default its ``nbytes``). Both may be changed later (the next ``put`` evicts to the new bound)."""

    def __init__(
        self,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        size: Callable[[Any], int] = _nbytes,
    ):
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if max_bytes is not None and max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size = size
        self._data: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.RLock()
        self._key_locks: dict[Hashable, threading.Lock] = {}
        self.hits = 0
        self.misses = 0

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            return key in self._data

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)

    @property
    def nbytes(self) -> int:
        """The bytes held (0 without a byte bound's ``size``)."""
        return self._bytes

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            return self._hit(key, default)

    def _hit(self, key: Hashable, default: Any) -> Any:
        """The value of ``key``, made the most recent and counted as a hit, else ``default`` (lock held)."""
        if key in self._data:
            self._data.move_to_end(key)
            self.hits += 1
            return self._data[key][0]
        return default

    def _evict(self, count: int, size: int, max_bytes: int | None) -> list[tuple[Hashable, Any]]:
        """Drop the oldest entries until ``count`` more entries of ``size`` bytes fit (lock held)."""
        out = []
        while self._data and (
            (self.max_entries is not None and len(self._data) + count > self.max_entries)
            or (max_bytes is not None and self._bytes + size > max_bytes)
        ):
            key, (value, nbytes) = self._data.popitem(last=False)
            self._bytes -= nbytes
            out.append((key, value))
        return out

    def put(self, key: Hashable, value: Any) -> list[tuple[Hashable, Any]]:
        """Keep ``value`` as the most recent (unless it alone exceeds ``max_bytes``), dropping the oldest entries
        until it fits; returns what was dropped (oldest first)."""
        size = self._size(value) if self.max_bytes is not None else 0
        with self._lock:
            if key in self._data:
                self._bytes -= self._data.pop(key)[1]
            if self.max_bytes is not None and size > self.max_bytes:
                return []
            dropped = self._evict(1, size, self.max_bytes)
            self._data[key] = (value, size)
            self._bytes += size
            return dropped

    def reserve(self, size: int, limit: int | None = None) -> None:
        """Drop the oldest entries until ``size`` more bytes fit the bound, or ``limit`` if smaller (before
        computing what will be put)."""
        bound = (
            self.max_bytes
            if limit is None
            else int(limit)
            if self.max_bytes is None
            else min(self.max_bytes, int(limit))
        )
        with self._lock:
            self._evict(0, size, bound)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """Return the cached value or compute it once (concurrent callers of one key wait for the first)."""
        with self._lock:
            value = self._hit(key, _MISSING)
            if value is not _MISSING:
                return value
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._data:
                    self.hits += 1
                    return self._data[key][0]
            self.misses += 1
            value = compute()
            self.put(key, value)
            with self._lock:
                self._key_locks.pop(key, None)
            return value

    def oldest(self, exclude: Container[Hashable] = ()) -> Hashable | None:
        """The least recently used key not in ``exclude`` (None when there is none)."""
        with self._lock:
            return next((k for k in self._data if k not in exclude), None)

    def pop(self, key: Hashable, default: Any = None) -> Any:
        """Drop ``key`` (its value, or ``default`` when it was not there)."""
        with self._lock:
            if key not in self._data:
                return default
            value, nbytes = self._data.pop(key)
            self._bytes -= nbytes
            return value

    def keys(self) -> list[Hashable]:
        with self._lock:
            return list(self._data)

    def items(self) -> list[tuple[Hashable, Any]]:
        with self._lock:
            return [(k, v) for k, (v, _) in self._data.items()]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0


__all__ = ["BoundedCache"]
