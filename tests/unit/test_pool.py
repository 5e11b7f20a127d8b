"""normviz.core.pool: blocks are reused only once nothing made from them is alive, and the pool stays bounded."""

from __future__ import annotations

import gc
import threading

import numpy as np
import torch

from normviz.core.pool import ArrayPool, size_class

MB = 2**20


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_a_dropped_array_is_reused_and_arrays_are_like_np_empty():
    pool = ArrayPool(max_idle_bytes=64 * MB)
    a = pool.empty((4, 256, 256), np.float32)
    assert a.shape == (4, 256, 256) and a.dtype == np.float32 and a.flags.c_contiguous and a.flags.writeable
    where = _addr(a)
    del a
    b = pool.empty((4, 256, 256), np.float32)
    assert _addr(b) == where and (pool.hits, pool.misses) == (1, 1)
    del b
    c = pool.empty((2, 256, 256), np.float64)  # same bytes, other dtype and shape: same class, same block
    assert _addr(c) == where and c.dtype == np.float64


def test_a_block_is_not_reused_while_a_view_or_a_tensor_of_it_lives():
    pool = ArrayPool(max_idle_bytes=64 * MB)
    a = pool.empty((512, 512), np.float64)
    a[...] = 7.0
    view, tensor = a[3], torch.from_numpy(a[5:9])
    del a
    b = pool.empty((512, 512), np.float64)
    b[...] = -1.0
    assert np.all(view == 7.0) and bool((tensor == 7.0).all())
    del view
    c = pool.empty((512, 512), np.float64)
    c[...] = -2.0
    assert bool((tensor == 7.0).all())  # the tensor alone still holds the first block
    del tensor, b, c
    gc.collect()
    assert pool.idle_bytes() == 3 * size_class(512 * 512 * 8)


def test_small_arrays_are_not_pooled():
    pool = ArrayPool(max_idle_bytes=64 * MB)
    pool.empty((8, 8), np.float32)
    assert pool.held_bytes() == 0 and pool.hits + pool.misses == 0


def test_free_blocks_are_bounded_in_bytes_and_in_age():
    pool = ArrayPool(max_idle_bytes=10 * MB, max_idle_takes=4)
    for k in range(1, 9):  # eight different sizes, 1–8 MB, each dropped at once
        pool.empty((k * MB,), np.uint8)
        assert pool.idle_bytes() <= 10 * MB
    assert pool.held_bytes() <= 10 * MB
    kept = pool.empty((MB,), np.uint8)  # blocks in use are forgotten after max_idle_takes, never reused
    for _ in range(6):
        pool.empty((3 * MB,), np.uint8)
    assert pool.held_bytes() <= 10 * MB
    kept[...] = 1
    assert np.all(kept == 1)


def test_size_classes_waste_under_an_eighth():
    for n in (MIN := 2**18, MIN + 1, 3 * MB + 5, 151 * MB, 12_582_912):
        c = size_class(n)
        assert n <= c < n * 1.125 + 1


def test_threads_never_share_a_block_in_use():
    pool = ArrayPool(max_idle_bytes=256 * MB)
    errors = []

    def work(i: int) -> None:
        for _ in range(30):
            a = pool.empty((256, 256), np.float64)
            a[...] = i
            if not np.all(a == i):
                errors.append(i)
            del a  # one block per thread at a time

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors  # no thread ever saw another thread's values in its block
    # Reuse still dominates. Not "misses <= 4": while one thread scans the free blocks it holds a reference to
    # each, so another thread may take that block for in use and allocate a fresh one (a safe miss, seen once
    # in a full-suite run: 5).
    assert pool.hits + pool.misses == 120 and pool.hits > 3 * pool.misses
