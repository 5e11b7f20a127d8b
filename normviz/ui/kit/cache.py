"""A small thread-safe LRU cache with a bound on entries, for loaded models and analyses.

The app keeps one instance of each in ``st.cache_resource`` so every session shares them. Values are never
mutated by the app: callers read arrays and build new ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable


class BoundedCache:
    def __init__(self, max_entries: int):
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
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

    def get(self, key: Hashable, default: Any = None) -> Any:
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key]
            return default

    def put(self, key: Hashable, value: Any) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def get_or_compute(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """Return the cached value or compute it once (concurrent callers of one key wait for the first)."""
        with self._lock:
            if key in self._data:
                self._data.move_to_end(key)
                self.hits += 1
                return self._data[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._data:
                    self.hits += 1
                    return self._data[key]
            self.misses += 1
            value = compute()
            self.put(key, value)
            with self._lock:
                self._key_locks.pop(key, None)
            return value

    def oldest(self, exclude=()) -> Hashable | None:
        """The least recently used key not in ``exclude`` (None when there is none)."""
        with self._lock:
            return next((k for k in self._data if k not in exclude), None)

    def pop(self, key: Hashable) -> Any:
        """Drop ``key`` (its value, or None when it was not there)."""
        with self._lock:
            return self._data.pop(key, None)

    def keys(self) -> list:
        with self._lock:
            return list(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
