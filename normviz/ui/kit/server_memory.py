"""One memory budget for the whole server process, shared by every visitor (not one per session).

    limit      NORMVIZ_SERVER_MEMORY_MB (default :data:`DEFAULT_MB`, 6144; never more than 3/4 of the machine)
    held       the server's resident memory now: its own process (``/proc/self/statm``) + its worker
               processes (``python -m normviz.workers``, :mod:`normviz.workers.process`: the heavy maps and long texts'
               layers, whose records live there; psutil) + what admitted requests still running said they
               would add and has not yet added (:meth:`ServerMemory.admit` reserves it until they finish; the
               growth of the resident memory since the oldest running request was admitted is taken off
               the reservations, so a request's memory is not counted twice, once resident and once reserved)
    need       what a request would add, estimated before it runs (:func:`need_bytes`): a text's first
               recording ≈ RECORD_FACTOR · L · n · d · itemsize (measured on smollm2: 4 values of d per token
               and layer, and as much again while the pass runs), whole [L, …] arrays of the keys asked for
               (× 1.5 for their temporaries), or one long layer's bounded cache and scratch

Before a session is made or maps are computed the app calls :meth:`ServerMemory.admit`: while held + need
would pass the limit (for a request larger than :data:`SHORT_NEED`, the limit less :data:`SHORT_ROOM`: room kept
for short texts, so that long pastes are refused before a sentence typed beside them is), the least recently used
sessions of *other* texts are dropped from the shared cache
(their records, maps and memoised figures go with them; then ``gc`` and glibc's ``malloc_trim``); if it still
does not fit, the request is refused with :class:`ServerBusyError`, a message that says what to do (wait for
other visitors, or a shorter text), before anything grows.

Release when visitors leave: :meth:`ServerMemory.note_use` records which Streamlit sessions use which cached
text; :meth:`ServerMemory.sweep` (every :data:`SWEEP_S` s in a daemon thread of the server) drops the texts no
connected visitor uses any more, the array pool's idle blocks, and trims the heap.
"""

from __future__ import annotations

import gc
import os
import threading
import time
from contextlib import contextmanager

from ...core.errors import ServerBusyError

DEFAULT_MB = 6144.0
SWEEP_S = 10.0
RECORD_FACTOR = 8.0  # records ≈ 4·d values per token and layer (smollm2 n = 1000: 252 MB), × 2 while recording
ARRAY_FACTOR = 1.5  # whole [L, …] arrays and their temporaries
LONG_LAYER_BYTES = (256 + 3 * 32 + 64) << 20  # memory.LONG_MAP_CACHE_MB + α blocks' scratch + Grams (long_layer)
SHORT_NEED = 64 << 20  # a short text's request (a sentence's records and maps: a few MB on smollm2)
# kept free for those: in the load benchmark (3 × 4,096-token pastes beside 4 sentence visitors) the long texts'
# reservations filled the budget and 15-30 of ~440 sentence reruns were refused; with this room (and a running
# request's memory counted once) none was, and the long ones waited instead (1 GB gave the same: 0 refused)
SHORT_ROOM = 512 << 20


def rss_bytes() -> int:
    """The process's resident memory (Linux: /proc/self/statm; elsewhere ru_maxrss, the peak)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


WORKER_MODULE = "normviz.workers"  # the worker processes' command line: python -m normviz.workers


def worker_rss_bytes() -> int:
    """The resident memory of this server's worker processes: its descendants whose command line runs
    ``-m normviz.workers`` (psutil; 0 where psutil is missing or no worker runs)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil comes with accelerate, a dependency
        return 0
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:  # pragma: no cover
        return 0
    total = 0
    for child in children:
        try:
            if WORKER_MODULE in child.cmdline():
                total += child.memory_info().rss
        except psutil.Error:  # ended meanwhile, or not ours to read
            continue
    return total


def trim_heap() -> None:
    """``gc.collect()``, then glibc's ``malloc_trim(0)`` (freed heap back to the system; nothing elsewhere)."""
    gc.collect()
    try:
        from ...core import memory as core_memory

        core_memory.libc().malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def limit_mb(configured: float | None) -> float:
    """The budget in MB: ``configured`` (NORMVIZ_SERVER_MEMORY_MB) or :data:`DEFAULT_MB`, at most 3/4 of this
    machine's memory (a budget past the machine would only move the failure to the kernel's OOM killer)."""
    from ...core.memory import physical_mb

    value = float(configured if configured is not None else DEFAULT_MB)
    phys = physical_mb()
    return min(value, 0.75 * phys) if phys else value


def need_bytes(lm, n_tokens: int, recorded: bool, array_bytes: int = 0, long_layer: bool = False) -> int:
    """What a request would add (module docstring): the recording if not ``recorded`` yet, ``array_bytes`` of
    whole arrays to compute, one long layer's working set if ``long_layer``."""
    try:
        d = int(lm.sizes[0])
    except Exception:  # a stand-in model without an architecture row
        d = 768
    layers = int(getattr(lm, "n_layers", 12) or 12)
    need = 0 if recorded else int(RECORD_FACTOR * layers * int(n_tokens) * d * 4)
    need += int(ARRAY_FACTOR * array_bytes)
    if long_layer:
        need += LONG_LAYER_BYTES
    return need


def _gb(b: float) -> str:
    return f"{b / 2**30:.1f} GB"


class ServerMemory:
    """The budget (module docstring) over ``cache`` (a :class:`normviz.ui.kit.cache.BoundedCache` of sessions):
    ``rss`` the server process's resident bytes, ``workers`` its worker processes' (both counted)."""

    def __init__(
        self,
        cache,
        limit_bytes: int,
        rss=rss_bytes,
        trim=trim_heap,
        workers=worker_rss_bytes,
        short_room: int = SHORT_ROOM,
    ):
        self.cache, self.limit = cache, int(limit_bytes)
        self.short_room = min(int(short_room), self.limit // 4)  # never more than a quarter of a small budget
        self._rss, self._trim, self._workers = rss, trim, workers
        self._lock = threading.Lock()
        self._running: dict = {}  # a running request's token -> (bytes it reserved, resident bytes when admitted,
        # its group: its session, whose requests count once, or itself)
        self._users: dict = {}  # cache key -> set of Streamlit session ids that used it
        self._key_of: dict = {}  # id(session) -> its cache key
        self.evicted = 0  # sessions dropped to make room
        self.released = 0  # sessions dropped because no connected visitor used them
        self.refused = 0
        self._thread: threading.Thread | None = None

    # ---- the budget
    def resident(self) -> int:
        """The server's resident memory now: its own process and its worker processes."""
        return self._rss() + self._workers()

    def _reserved_at(self, resident: int, extra: tuple | None = None) -> int:
        """What running requests reserved and have not yet made resident: their reservations less the growth of
        the resident memory since the oldest of them was admitted (never below 0). Requests on the same session
        (``extra``: one more, (group, need), being admitted) count once, as the largest of them: they share its
        records (recorded once) and run one after another on its lock (``Session._lock``; the worker process
        takes one job at a time), so their memory is never needed side by side. A lone visitor's first view of a
        long text was refused because of this ("4.5 GB of 6.0 GB are in use" with the server at 1.46 GB): the
        browser's first reports (the page width) start new runs of the page while the first one records, and
        each run reserved the same recording again."""
        running = list(self._running.values()) + ([(extra[1], resident, extra[0])] if extra is not None else [])
        if not running:
            return 0
        largest: dict = {}
        for need, _, group in running:
            largest[group] = max(largest.get(group, 0), need)
        since = min(at for _, at, _ in running)
        return max(0, sum(largest.values()) - max(0, resident - since))

    def held(self) -> int:
        now = self.resident()
        return now + self._reserved_at(now)

    @contextmanager
    def admit(self, need: int, session=None, what: str = "this text"):
        """Within: ``need`` bytes reserved for the caller (dropping least recently used sessions of other texts
        first, never ``session``'s own); ServerBusyError when they would not fit even then."""
        need = max(0, int(need))
        room = self.limit if need <= SHORT_NEED else self.limit - self.short_room
        group = ("session", id(session)) if session is not None else ("request", object())
        with self._lock:
            if self._with(group, need) > room:
                own = self._key_of.get(id(session))
                self._make_room(group, need, set() if own is None else {own}, room)
            now = self.resident()
            in_use = now + self._reserved_at(now)
            more = now + self._reserved_at(now, (group, need)) - in_use  # past what its session reserved already
            if in_use + more > room:
                self.refused += 1
                raise ServerBusyError(
                    f"The server is at its memory budget: {_gb(in_use)} of {_gb(self.limit)} are in "
                    f"use (the models, other visitors' texts and the worker processes), and {what} would need about "
                    f"{_gb(more)} more. "
                    "Try again "
                    "in a minute (texts nobody is looking at are released), or with a shorter text. "
                    "(The operator sets the budget with NORMVIZ_SERVER_MEMORY_MB.)"
                )
            token = object()
            self._running[token] = (need, now, group)
        try:
            yield
        finally:
            with self._lock:
                del self._running[token]

    def _with(self, group, need: int) -> int:
        """What would be held with a request of ``need`` bytes on ``group`` (its session) admitted."""
        now = self.resident()
        return now + self._reserved_at(now, (group, need))

    def _make_room(self, group, need: int, keep: set, room: int) -> None:
        """Drop the oldest sessions (not in ``keep``) one by one until ``need`` (on ``group``) fits in ``room``
        (called with the lock)."""
        while self._with(group, need) > room:
            key = self.cache.oldest(exclude=keep)
            if key is None:
                return
            self._forget(key)
            self.evicted += 1
            self._trim()

    # ---- visitors leaving
    def note_use(self, key, visitor: str | None, session=None) -> None:
        """``visitor`` (a Streamlit session id) uses the cached text ``key`` (whose session is ``session``)."""
        with self._lock:
            if session is not None:
                self._key_of[id(session)] = key
            if visitor is not None:
                self._users.setdefault(key, set()).add(visitor)

    def _forget(self, key) -> None:
        self.cache.pop(key)
        self._users.pop(key, None)
        for sid, k in list(self._key_of.items()):
            if k == key:
                del self._key_of[sid]

    def sweep(self, active) -> int:
        """Drop cached texts whose visitors are all gone (``active(visitor_id)`` False), then the array
        pool's idle blocks, and trim the heap; returns how many were dropped. A text cached without a noted
        visitor (the warm-up's) stays: least recently used, it goes first when room is needed."""
        with self._lock:
            gone = []
            for key, users in list(self._users.items()):
                live = {u for u in users if active(u)}
                if live:
                    self._users[key] = live
                else:
                    gone.append(key)
            for key in gone:
                self._forget(key)
            self.released += len(gone)
        if gone:
            from ...core.pool import POOL

            POOL.clear()
            self._trim()
        return len(gone)

    def start_sweeping(self, active, every_s: float = SWEEP_S) -> None:
        """:meth:`sweep` every ``every_s`` seconds in a daemon thread (once)."""
        if self._thread is not None:
            return

        def loop():
            while True:
                time.sleep(every_s)
                try:
                    self.sweep(active)
                except Exception:  # pragma: no cover - never stop sweeping
                    pass

        self._thread = threading.Thread(target=loop, name="normviz-memory-sweep", daemon=True)
        self._thread.start()

    def stats(self) -> dict:
        rss, workers = self._rss(), self._workers()  # read once: the reservation left is taken off their growth
        return {
            "limit": self.limit,
            "rss": rss,
            "workers": workers,
            "reserved": self._reserved_at(rss + workers),
            "sessions": len(self.cache),
            "evicted": self.evicted,
            "released": self.released,
            "refused": self.refused,
        }


__all__ = [
    "DEFAULT_MB",
    "ServerBusyError",
    "ServerMemory",
    "limit_mb",
    "need_bytes",
    "rss_bytes",
    "trim_heap",
    "worker_rss_bytes",
]
