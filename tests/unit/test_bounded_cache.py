"""One bounded-cache type (normviz.core.cache.BoundedCache): least recently used out first, bounded by a count
and/or bytes; every bounded cache of the package is one (the app's models and sessions, a session's layer maps, the
pages' memo, the worker's models and sessions)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from normviz.core.cache import BoundedCache

ROOT = Path(__file__).resolve().parents[2]


def test_count_bound_least_recently_used_out_first():
    c = BoundedCache(2)
    c.put("a", 1)
    c.put("b", 2)
    assert c.get("a") == 1  # a is now the most recent
    assert c.put("c", 3) == [("b", 2)]
    assert c.keys() == ["a", "c"] and c.oldest() == "a" and c.oldest(exclude={"a"}) == "c"
    assert c.pop("a") == 1 and c.pop("a", "gone") == "gone" and len(c) == 1
    with pytest.raises(ValueError):
        BoundedCache(0)


def test_byte_bound_keeps_what_fits_and_refuses_what_never_fits():
    c = BoundedCache(max_bytes=10_000)
    for k in range(5):  # 4,000 bytes each: two fit
        c.put(k, np.zeros(500))
    assert c.keys() == [3, 4] and c.nbytes == 8_000
    assert c.put("big", np.zeros(2_000)) == [] and "big" not in c and c.nbytes == 8_000  # 16,000 bytes: not kept
    c.put(3, np.zeros(100))  # replacing a key counts its new size only
    assert c.nbytes == 4_800 and c.keys() == [4, 3]
    c.reserve(6_000)  # room before computing: the oldest goes
    assert c.keys() == [3] and c.nbytes == 800
    c.reserve(0, limit=100)
    assert len(c) == 0 and c.nbytes == 0


def test_both_bounds_and_a_size_function():
    c = BoundedCache(3, 10, size=len)
    c.put("a", "xxxx")
    c.put("b", "xxxx")
    c.put("c", "x")
    assert c.keys() == ["a", "b", "c"] and c.nbytes == 9
    c.put("d", "x")  # the count bound
    assert c.keys() == ["b", "c", "d"]
    c.put("e", "xxxxxxx")  # the count bound drops b; then 2 + 7 fits
    assert c.keys() == ["c", "d", "e"] and c.nbytes == 9
    c.put("f", "xxxxxxxxx")  # the byte bound: 9 bytes leave room for no other
    assert c.keys() == ["f"] and c.nbytes == 9


def test_every_bounded_cache_is_the_one_type():
    """No module keeps its own eviction loop; the caches in use are instances of the one type."""
    from normviz.core.memory import LayerCache
    from normviz.ui.kit import cache, memo
    from normviz.workers import process

    own = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "normviz").rglob("*.py")
        if re.search(r"popitem\(last=False\)|\.pop\(next\(iter\(", p.read_text())
    ]
    assert own == ["normviz/core/cache.py"]
    assert cache.BoundedCache is BoundedCache and issubclass(LayerCache, BoundedCache)
    assert LayerCache(limit_mb=3).max_bytes == 3 * 2**20
    assert isinstance(process._MODELS, BoundedCache) and isinstance(process._SESSIONS, BoundedCache)
    owner = np.zeros(2)
    memo.memoised(owner, "k", lambda: np.ones(3))
    assert isinstance(memo._MEMO[id(owner)][1], BoundedCache)
    assert (memo._MEMO[id(owner)][1].max_entries, memo._MEMO[id(owner)][1].max_bytes) == (memo.LIMIT, memo.MAX_BYTES)
