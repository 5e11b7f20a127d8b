"""normviz.core.memory: the layer cache's room made before a long layer is computed, and glibc's heap policy while it
is."""

import numpy as np

from normviz.core import memory


def test_reserve_drops_the_oldest_until_the_new_layer_fits():
    cache = memory.LayerCache(limit_mb=3)
    for k in range(3):
        cache.put(k, np.zeros(2**20 // 8))  # 1 MB each
    cache.reserve(2 * 2**20)
    assert [cache.get(k) is None for k in range(3)] == [True, True, False] and cache.nbytes == 2**20


def test_scratch_heap_changes_nothing_without_a_fixed_threshold_and_always_puts_it_back(monkeypatch):
    calls = []

    class Libc:
        def mallopt(self, what, value):
            calls.append((what, value))
            return 1

        def malloc_trim(self, pad):
            calls.append(("trim", pad))
            return 1

    monkeypatch.setattr(memory, "libc", lambda: Libc())
    monkeypatch.setattr(memory, "FIXED_MMAP_THRESHOLD", None)
    with memory.scratch_heap(64 << 20):
        pass
    assert calls == []  # glibc's own dynamic policy: left alone
    monkeypatch.setattr(memory, "FIXED_MMAP_THRESHOLD", 1 << 20)
    try:
        with memory.scratch_heap(64 << 20):
            with memory.scratch_heap(64 << 20):  # a second thread's layer meanwhile: set once, put back once
                assert calls == [(memory.M_MMAP_THRESHOLD, 64 << 20), (memory.M_TRIM_THRESHOLD, 256 << 20)]
            raise KeyError("a failed layer")
    except KeyError:
        pass
    assert (
        calls[2:] == [(memory.M_MMAP_THRESHOLD, 1 << 20), (memory.M_TRIM_THRESHOLD, memory.TRIM_THRESHOLD), ("trim", 0)]
        and memory._HEAP_USERS == 0
    )
