"""A bounded pool of large array blocks, reused from one analysis to the next.

Every analysis of the norm family writes a few hundred MB of fresh arrays (BERT-base at n = 512: α and
‖α f‖ are 151 MB each); allocated fresh each time, glibc maps them in and returns them with each analysis,
and the kernel zeroes and faults in every page again (seconds now and then, when it compacts memory for huge
pages). The pool keeps the blocks instead: :func:`empty` hands out an array backed by a block of the same size
class that nobody uses any more, already faulted in.

A block is free when only the pool still references it: every array handed out is a view of its block, and
numpy and torch views keep their base alive, so ``sys.getrefcount`` tells, without finalizers, when the last
map array, view or tensor made from it is gone. Results may be kept as long as wanted: a block in use is
simply not reused.

Bound: the pool holds at most :data:`MAX_IDLE_BYTES` (default 512 MiB; env ``NORMVIZ_POOL_MB``, 0 turns it
off) of blocks nobody uses, and a free block not reused within :data:`MAX_IDLE_TAKES` later requests (about
two analyses of the norm family, which takes ~9 blocks each) is released; a block still in use then is forgotten (freed
as usual when its
arrays go), so the pool never tracks more than the blocks of its last requests. Arrays under
:data:`MIN_BYTES` come from ``np.empty`` (the heap serves those well).
"""

from __future__ import annotations

import sys
import threading

import numpy as np

MIN_BYTES = 1 << 18  # 256 KiB
MAX_IDLE_TAKES = 16


def _env_bytes() -> int:
    from . import settings

    return int(settings.env("NORMVIZ_POOL_MB") * 2**20)


MAX_IDLE_BYTES = _env_bytes()


def size_class(nbytes: int) -> int:
    """``nbytes`` rounded up to one of 8 steps per power of two (≤ 12.5 % unused), so that texts of nearby
    lengths share blocks."""
    step = 1 << max(0, nbytes.bit_length() - 4)
    return -(-nbytes // step) * step


class _Block:
    __slots__ = ("raw", "tick")

    def __init__(self, nbytes: int):
        self.raw = np.empty(nbytes, dtype=np.uint8)
        self.tick = 0

    def free(self) -> bool:
        # references: this slot, and getrefcount's own argument; any array, view or tensor made from the
        # block holds one more (numpy collapses view chains onto the block, which owns the memory)
        return sys.getrefcount(self.raw) <= 2


class ArrayPool:
    """Blocks by size class; :meth:`empty` reuses a free one or makes a new one (thread-safe)."""

    def __init__(
        self, max_idle_bytes: int = MAX_IDLE_BYTES, max_idle_takes: int = MAX_IDLE_TAKES, min_bytes: int = MIN_BYTES
    ):
        self.max_idle_bytes = max_idle_bytes
        self.max_idle_takes = max_idle_takes
        self.min_bytes = min_bytes
        self._blocks: dict[int, list[_Block]] = {}
        self._lock = threading.Lock()
        self._tick = 0
        self.hits = 0
        self.misses = 0

    def empty(self, shape, dtype) -> np.ndarray:
        """An uninitialised C-contiguous array of ``shape`` and ``dtype``, like ``np.empty``."""
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < self.min_bytes or self.max_idle_bytes <= 0:
            return np.empty(shape, dtype)
        cls = size_class(nbytes)
        with self._lock:
            self._tick += 1
            blocks = self._blocks.setdefault(cls, [])
            block = next((b for b in blocks if b.free()), None)
            if block is None:
                self.misses += 1
                block = _Block(cls)
                blocks.append(block)
            else:
                self.hits += 1
            block.tick = self._tick
            self._trim()
            return block.raw[:nbytes].view(dtype).reshape(shape)

    def _trim(self) -> None:
        """Forget blocks not taken within the last ``max_idle_takes`` requests, then the least recently used
        free ones while more than ``max_idle_bytes`` are free."""
        free = []
        for cls, blocks in list(self._blocks.items()):
            keep = []
            for b in blocks:
                if self._tick - b.tick > self.max_idle_takes:
                    continue  # free: released now; in use (a kept result): freed as usual when its arrays go
                if b.free():
                    free.append((b.tick, cls, b))
                keep.append(b)
            if keep:
                self._blocks[cls] = keep
            else:
                del self._blocks[cls]
        total = sum(cls for _, cls, _ in free)
        for _, cls, b in sorted(free, key=lambda t: t[0]):
            if total <= self.max_idle_bytes:
                break
            self._blocks[cls].remove(b)
            total -= cls
            if not self._blocks[cls]:
                del self._blocks[cls]

    def idle_bytes(self) -> int:
        with self._lock:
            return sum(cls for cls, blocks in self._blocks.items() for b in blocks if b.free())

    def held_bytes(self) -> int:
        """Bytes of every block the pool tracks (free or in use)."""
        with self._lock:
            return sum(cls * len(blocks) for cls, blocks in self._blocks.items())

    def clear(self) -> None:
        """Forget every block (free ones are released now, blocks in use when their arrays go)."""
        with self._lock:
            self._blocks.clear()


POOL = ArrayPool()


def empty(shape, dtype) -> np.ndarray:
    """``np.empty`` from the process's pool (see the module's docstring)."""
    return POOL.empty(shape, dtype)
