"""What maps hold in memory: sizes of whole [L, …] arrays known before computing, a memory budget, and the
bounded cache of single-layer maps that ``Session.map`` keeps.

    nbytes(key)   L·H·rows·cols (per-head keys) or L·rows·cols, times the working dtype's size
    budget        option ``memory_budget_mb`` (the app: NORMVIZ_MEMORY_BUDGET_MB); default half this
                  machine's memory. ``Session.get`` refuses keys whose arrays (with those it already holds)
                  would exceed it, with TooCostlyError, before anything runs.
    LayerCache    (key, layer) → that layer's array, least recently used dropped first beyond ``map_cache_mb``
                  (default 512)
"""

from __future__ import annotations

import contextlib
import math
import os
import threading

import numpy as np

from .cache import BoundedCache
from .errors import TooCostlyError

MAP_CACHE_MB = 512
LONG_MAP_CACHE_MB = 256  # a long input's layer (α streamed) is put into at most this much: smollm2 at n = 4000
# holds one layer of Explore's four maps (244 MB), not two (the app's memory budget: records + this + scratch)


def physical_mb() -> float | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def budget_mb(options: dict) -> float | None:
    """The memory budget for a session's arrays in MB (option ``memory_budget_mb``; None: half the machine's)."""
    value = options.get("memory_budget_mb")
    if value is not None:
        return float(value)
    phys = physical_mb()
    return phys / 2 if phys else None


def shape_of(per_head: bool, n_layers: int, n_heads: int, rows: int, cols: int) -> tuple[int, ...]:
    return (n_layers, n_heads, rows, cols) if per_head else (n_layers, rows, cols)


def nbytes(shape: tuple[int, ...], itemsize: int) -> int:
    return int(np.prod(shape, dtype=np.int64)) * int(itemsize)


def mb(size: int) -> str:
    return f"{size / 2**30:.1f} GB" if size >= 2**30 else f"{size / 2**20:.0f} MB"


def over_budget_error(
    keys: list[str], new_bytes: int, held_bytes: int, budget: float, n_tokens: int, shapes: dict[str, tuple[int, ...]]
) -> TooCostlyError:
    """The refusal: what the arrays would hold, the budget, and the alternatives (one layer at a time, fewer tokens)."""
    total = new_bytes + held_bytes
    fits = max(4, int(n_tokens * math.sqrt(max(budget * 2**20 - held_bytes, 1) / max(new_bytes, 1))))
    listed = ", ".join(f"{k} {list(shapes[k])}" for k in keys)
    held = f" ({mb(total)} with the {mb(held_bytes)} this session already holds)" if held_bytes else ""
    return TooCostlyError(
        f"The whole arrays {listed} would hold {mb(new_bytes)}{held} for {n_tokens} tokens, over the memory budget "
        f"of {mb(int(budget * 2**20))} (option "
        f"memory_budget_mb; in the app NORMVIZ_MEMORY_BUDGET_MB). Ask for one layer at a time with "
        f"Session.map(key, layer, head), or shorten the text to about {fits} tokens."
    )


# ---- glibc's heap while a long layer is computed
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
TRIM_THRESHOLD = 128 << 10  # glibc's default (fixed, like the mmap threshold, once that was set by hand)
FIXED_MMAP_THRESHOLD: int | None = None  # set by whoever fixed glibc's mmap threshold (the app: ui.memory.bound_heap)
_HEAP_LOCK = threading.Lock()
_HEAP_USERS = 0


def libc():
    """glibc, by ctypes (OSError or AttributeError where it is not there)."""
    import ctypes
    import ctypes.util

    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


@contextlib.contextmanager
def scratch_heap(block_bytes: int):
    """Within: glibc serves blocks up to ``block_bytes`` (a long layer's α blocks and their eager temporaries,
    tens of MB each) from its heap, where one block's freed memory is reused by the next, instead of mapping
    and faulting in fresh pages for every one (measured: ~1 CPU s of a smollm2 layer at n = 4000 under the
    app's 1 MB threshold); after: the threshold back, and the freed heap handed back to the system
    (``malloc_trim``), so the RSS is the working set again. Only where a fixed threshold was set
    (:data:`FIXED_MMAP_THRESHOLD`): glibc's own dynamic threshold already reuses such blocks."""
    global _HEAP_USERS
    fixed = FIXED_MMAP_THRESHOLD
    if fixed is None or block_bytes <= fixed:
        yield
        return
    try:
        lib = libc()
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        yield
        return
    with _HEAP_LOCK:
        _HEAP_USERS += 1
        if _HEAP_USERS == 1:  # and freed blocks stay in the heap (not trimmed at each free) until the end
            lib.mallopt(M_MMAP_THRESHOLD, int(block_bytes))
            lib.mallopt(M_TRIM_THRESHOLD, int(4 * block_bytes))
    try:
        yield
    finally:
        with _HEAP_LOCK:
            _HEAP_USERS -= 1
            if _HEAP_USERS == 0:
                lib.mallopt(M_MMAP_THRESHOLD, int(fixed))
                lib.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
                lib.malloc_trim(0)


class LayerCache(BoundedCache):
    """(key, layer) → array, bounded in bytes (least recently used dropped first); thread-safe: the one
    :class:`normviz.core.cache.BoundedCache`, sized in MB."""

    def __init__(self, limit_mb: float = MAP_CACHE_MB):
        super().__init__(max_bytes=int(limit_mb * 2**20))

    @property
    def limit(self) -> int:
        return int(self.max_bytes or 0)


__all__ = [
    "LONG_MAP_CACHE_MB",
    "LayerCache",
    "MAP_CACHE_MB",
    "scratch_heap",
    "budget_mb",
    "mb",
    "nbytes",
    "over_budget_error",
    "shape_of",
]
