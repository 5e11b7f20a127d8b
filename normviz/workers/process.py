"""The costly map families in a separate, lower-priority worker process, so that one visitor's heavy analysis
does not make another visitor's short request wait.

    server thread: session.get(["norm", "value_zeroing", "ff_res", …])
        norm, rollouts …          computed here, in the server's own threads
        value_zeroing, ff_res …   HeavyWorker.compute ─► worker process (python -m normviz.workers):
                                  os.nice(+10), one torch/numba/BLAS thread, its own copy of the model
                                  (loaded by name, as the server did); it re-records the same token ids,
                                  streams its progress back and returns the arrays (pickled over its pipes)

Why a process and not a thread: the server's sessions share one Python process, where the heavy families'
torch/numba threads compete with short requests for the cores and their Python parts for the GIL, and
torch's thread count is process-wide (it cannot be lowered for one thread only). In a process of its own, at a
lower priority and with one thread, a heavy job yields the cores to short requests. On this shared 2-core
machine the end-to-end benchmark (``benchmarks/bench_two_visitors.py``) found a short request within 2× of its
solo time both with the worker and without it (once no lock is held around passes), too noisy to separate
the two. One process by default: heavy jobs of several visitors queue, and the waiting is reported
(``Analysis.waited_s`` and the progress message).

Long texts' layers (the public app: ``long_layers``): Explore's layer of a long text
(:meth:`HeavyWorker.layer_maps`, ``Session.maps`` there) is a job too; the worker keeps the last
``NORMVIZ_WORKER_SESSIONS`` (3) texts it recorded, dropped after ``NORMVIZ_WORKER_IDLE_S`` (90) s unused, so a
long text's records and α blocks live in the worker, and the server's threads stay free for short requests
(waiting visitors see how long they have waited, as for the costly maps).

Memory back (issue 42): a process without a job for ``NORMVIZ_WORKER_IDLE_S`` s is ended (:meth:`HeavyWorker.
retire_idle`, a reaper thread of the server's), everything it held with it, and the next job starts another; a
job still waiting for a process is dropped when nobody waits for its answer (:attr:`HeavyWorker.wanted`, a
newer run: ``progress.stopped()``).

Only CPU models loaded by name (``normviz.load``) go to the worker; a model built in memory, sharded with
``device_map`` or on a GPU is computed in the server as before, and so are texts shorter than ``min_tokens``
(there the heavy families take milliseconds and a round trip would cost more).

Which families go there: those whose module says ``HEAVY = True`` (read from the family, so that renaming a
family changes nothing). Every job has a deadline, ``grace + factor × budget`` seconds from the moment it is
handed to a process, ``budget`` being the family's cost budget (its ``BUDGET``: seconds in the session's
options; families are refused before they run when their estimate exceeds it, so a job past several times
its budget is stuck or starved, e.g. a stopped process). Past the deadline the process is killed and
replaced and the visitor gets a :class:`~normviz.core.errors.DeadlineError` (a message, not a traceback); the
other visitors' jobs queue behind it no longer than that. A process found dead when a job is handed out (it
died while idle) is replaced silently and the job goes to the new one.
"""

from __future__ import annotations

import collections
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from ..core import settings
from ..core.cache import BoundedCache
from ..methods.base import DEADLINE_FACTOR, DEFAULT_DEADLINE_S  # noqa: F401 - × the budget; no seconds budget

POLL_S = 0.25
DEADLINE_GRACE_S = 60.0  # + loading the model in a fresh process (smollm2's first load takes ~30 s)
LAYER_DEADLINE_S = 600.0  # one long text's layer, its recording included (smollm2 at n = 4096, one thread, nice +10)


def is_heavy(family) -> bool:
    """Whether ``family`` (a registered family's record) is one of the costly ones (its module's ``HEAVY``)."""
    return family.heavy


def heavy_families() -> tuple[str, ...]:
    """The NAMEs of the registered families flagged ``HEAVY``."""
    from ..methods import registry

    return tuple(name for name, fam in registry.families().items() if is_heavy(fam))


@dataclass(frozen=True)
class Job:
    """What the worker needs to compute ``keys`` of one session exactly as the server would."""

    model: str  # the name normviz.load was given
    device: str
    dtype: str
    cache_key: tuple  # the server's LoadedModel.cache_key: the worker checks it loaded the same model
    encoded: object  # Session.inputs: the same token ids (an Encoded, with segment ids; or Seq2SeqInputs)
    text: str
    text_pair: str | None
    options: dict
    keys: tuple[str, ...]
    layer: int | None = None  # a long text's layer: Session.maps(keys, layer, head) on the worker's session
    head: int | None = None


@dataclass
class Result:
    arrays: dict
    notes: dict
    error: tuple[str, str] | None  # (exception class name, message) of a NormvizError raised in the worker
    seconds: float  # how long it ran there
    pid: int = 0  # the worker process that computed it


@dataclass(frozen=True)
class Ran:
    """One finished job (:attr:`HeavyWorker.ran`): which family, its keys, the process, its time."""

    family: str
    keys: tuple[str, ...]
    pid: int
    seconds: float


_EOF = ("eof",)


class _Process:
    """One worker process (``python -m normviz.workers``): pickled messages on its stdin and stdout. A reader
    thread unpickles what the process sends into :attr:`inbox`, so that waiting for it can have a deadline."""

    def __init__(self, nice: int, threads: int, max_models: int):
        env = {
            **os.environ,
            "NORMVIZ_WORKER_NICE": str(nice),
            "NORMVIZ_WORKER_MODELS": str(max_models),
            **{
                v: str(threads)
                for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
            },
        }
        path = os.pathsep.join(p for p in sys.path if p)  # the same normviz as the server
        env["PYTHONPATH"] = path
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "normviz.workers", "--parent", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
        )
        self.pid = self.proc.pid
        self.used = time.monotonic()  # when its last job ended (or it started): idle processes are ended
        self.inbox: queue.Queue = queue.Queue()
        self._closed = False  # the reader saw the end of the process's stdout
        threading.Thread(target=self._read, name=f"normviz-worker-{self.pid}", daemon=True).start()

    def _read(self) -> None:
        try:
            while True:
                self.inbox.put(pickle.load(self.proc.stdout))
        except Exception:  # EOF, a broken pipe, a message cut by a kill: the process is gone for us
            self._closed = True
            self.inbox.put(_EOF)

    def send(self, message) -> None:
        pickle.dump(message, self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.flush()

    def receive(self, timeout: float):
        """The next message, waiting at most ``timeout`` s (``queue.Empty`` past it); EOFError once it ended."""
        message = self.inbox.get(timeout=max(timeout, 0.0))
        if message is _EOF:
            self.inbox.put(_EOF)
            raise EOFError("the worker process ended")
        return message

    def alive(self) -> bool:
        return self.proc.poll() is None and not self._closed

    def kill(self) -> None:
        """End it now (SIGKILL ends a stopped process too)."""
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except Exception:  # pragma: no cover - already gone
            pass

    def stop(self) -> None:
        if self.alive():
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=5)
            except Exception:
                self.kill()
        else:
            self.kill()  # reap it


class HeavyWorker:
    """``processes`` worker processes for the costly families (see the module docstring).

    Processes start on first need (:meth:`prepare`, :meth:`start` or the first job); each loads a model on
    first use and keeps the last ``max_models``. A job waits for a free process; the time it waited is the
    session's wait (``Analysis.waited_s``), and the progress message says so meanwhile. ``families``: NAMEs to
    send there instead of the families flagged ``HEAVY``. ``deadline_factor``, ``deadline_grace_s``,
    ``default_deadline_s``: each job's deadline (:meth:`deadline_s`)."""

    def __init__(
        self,
        processes: int = 1,
        *,
        nice: int = 10,
        threads: int = 1,
        min_tokens: int = 24,
        max_models: int = 2,
        families: tuple[str, ...] | None = None,
        deadline_factor: float = DEADLINE_FACTOR,
        deadline_grace_s: float = DEADLINE_GRACE_S,
        default_deadline_s: float = DEFAULT_DEADLINE_S,
        long_layers: bool = False,
        layer_deadline_s: float = LAYER_DEADLINE_S,
        idle_s: float | None = None,
    ):
        self.processes, self.nice, self.threads = processes, nice, threads
        self.min_tokens, self.max_models = min_tokens, max_models
        self.families = None if families is None else tuple(families)
        self.deadline_factor, self.deadline_grace_s = float(deadline_factor), float(deadline_grace_s)
        self.default_deadline_s = float(default_deadline_s)
        self.long_layers, self.layer_deadline_s = bool(long_layers), float(layer_deadline_s)
        self.idle_s = float(settings.env("NORMVIZ_WORKER_IDLE_S") if idle_s is None else idle_s)
        self.wanted = None  # () -> bool, asked in the thread of a job waiting for a process: False, it is dropped
        self._reaper: threading.Thread | None = None
        self._lock = threading.Lock()
        self._free: queue.Queue[_Process] = queue.Queue()
        self._all: list[_Process] = []
        self.busy = 0  # jobs running now
        self.replaced = 0  # processes replaced (died, or killed past a deadline)
        self.drained = 0  # jobs left by their caller mid-way (their result read and dropped, :meth:`_drain`)
        self.retired = 0  # processes ended after idle_s s without a job (their memory back to the system)
        self.dropped = 0  # jobs dropped before they ran: their visitor left, or a newer run of theirs came
        self.ran: collections.deque[Ran] = collections.deque(maxlen=64)  # the last finished jobs

    # ---- which work goes there
    def _eligible(self, session) -> bool:
        lm = session.lm
        return (
            session.n_tokens >= self.min_tokens
            and lm.device.type == "cpu"
            and not str(lm.revision).startswith("memory:")
            and "|map:" not in str(lm.revision)
        )

    def takes(self, session, family, keys) -> bool:
        heavy = is_heavy(family) if self.families is None else family.name in self.families
        return heavy and self._eligible(session)

    def deadline_s(self, family, options: dict) -> float:
        """``grace + factor × budget`` with ``budget`` = the family's ``BUDGET.seconds(options)``
        (:class:`normviz.methods.base.Budget`), else the default deadline."""
        spec = family.budget
        budget = spec.seconds(options) if spec is not None else None
        if budget is None:
            return self.default_deadline_s
        return self.deadline_grace_s + self.deadline_factor * float(budget)

    def prepare(self, session) -> None:
        """Start the processes and load the session's model there, in the background, when this session's
        costly maps would go to the worker: its first heavy map then does not wait for a process to start."""
        if len(self._all) < self.processes and self._eligible(session):
            self.start(warm_model=session.lm.name)

    # ---- the processes
    def start(self, warm_model: str | None = None) -> "HeavyWorker":
        with self._lock:
            while len(self._all) < self.processes:
                p = self._new(warm_model)
                self._all.append(p)
                self._free.put(p)
            if self._reaper is None:
                self._reaper = threading.Thread(target=self._reap, name="normviz-worker-reaper", daemon=True)
                self._reaper.start()
        return self

    def _reap(self) -> None:
        """In a thread while any process runs: end the processes that have had no job for :attr:`idle_s` s
        (:meth:`retire_idle`)."""
        every = max(0.1, min(5.0, self.idle_s / 4))
        while True:
            time.sleep(every)
            with self._lock:
                if not self._all:
                    self._reaper = None
                    return
            self.retire_idle()

    def retire_idle(self) -> int:
        """End the free processes whose last job ended more than :attr:`idle_s` s ago; returns how many.
        Everything they held goes back to the system at once: the texts they kept (which their own rule drops
        after the same time unused), their model, torch and a heap that ``malloc_trim`` returns only in part
        (after long texts the idle worker kept 2.4–2.6 GB for 190–240 s, counted against the server's budget).
        The next job starts a new process (loading its model: seconds), as the first one did."""
        now = time.monotonic()
        with self._lock:
            with self._free.mutex:  # taken out of the free queue: no job can be handed to them meanwhile
                idle = [p for p in self._free.queue if now - p.used > self.idle_s]
                for p in idle:
                    self._free.queue.remove(p)
            for p in idle:
                if p in self._all:
                    self._all.remove(p)
            self.retired += len(idle)
        for p in idle:
            p.stop()
        return len(idle)

    def _release(self, proc: _Process) -> None:
        """``proc`` done with its job: back among the free ones, its idle time counted from now."""
        proc.used = time.monotonic()
        self._free.put(proc)

    def _new(self, warm_model: str | None) -> _Process:
        p = _Process(self.nice, self.threads, self.max_models)
        if warm_model:
            try:
                p.send(("warm", warm_model))
            except OSError:  # pragma: no cover - died at birth: found dead when a job is handed out
                pass
        return p

    def shutdown(self) -> None:
        with self._lock:
            procs, self._all = self._all, []
            self._free = queue.Queue()
        for p in procs:
            p.stop()

    def _replace(self, dead: _Process, warm_model: str | None = None) -> None:
        """Kill ``dead`` and put a new process (loading ``warm_model``) in its place among the free ones."""
        dead.kill()
        with self._lock:
            self.replaced += 1
            if dead not in self._all:  # shut down meanwhile
                return
            self._all.remove(dead)
            p = self._new(warm_model)
            self._all.append(p)
        self._free.put(p)

    def _take(self, progress, names: str) -> tuple[_Process, float]:
        """A free, live process (dead idle ones are replaced unseen) and the seconds waited for it. A job that
        finds none free says so at once (not only after its first wait: a process freed within that wait gave
        the waiting visitor no word of it, issue 42) and is dropped at once when nobody wants it any more."""
        t0 = time.perf_counter()
        first = True
        while True:
            try:
                proc = self._free.get_nowait() if first else self._free.get(timeout=POLL_S)
            except queue.Empty:
                first = False
                if len(self._all) < self.processes:  # none yet, or ended while idle (:meth:`retire_idle`)
                    self.start()
                if progress:
                    progress(
                        0.0,
                        f"waiting for another visitor's costly maps to finish "
                        f"({time.perf_counter() - t0:.0f} s so far); then {names}",
                    )
                self._check_wanted(progress, names)
                continue
            if proc.alive():
                return proc, time.perf_counter() - t0
            self._replace(proc)

    def _check_wanted(self, progress, names: str) -> None:
        """While a job waits for a process: drop it when nobody wants its answer any more, before it runs: its
        visitor left (:attr:`wanted`, e.g. the app's "is this Streamlit session still connected") or a newer
        run of the visitor's page came (``progress.stopped()``, :mod:`normviz.ui.kit.interrupts`: that run
        asks for what it needs itself). Queued jobs of visitors who had left otherwise ran for minutes after
        them, keeping the worker's memory (issue 42)."""
        from ..core import errors

        stopped = getattr(progress, "stopped", None)
        try:
            gone = (stopped is not None and stopped()) or (self.wanted is not None and not self.wanted())
        except Exception:  # pragma: no cover - a hook that fails: the job runs, as before
            gone = False
        if gone:
            with self._lock:
                self.dropped += 1
            raise errors.NormvizError(f"Not computed ({names}): nobody is waiting for it any more.")

    def _drain(self, proc: _Process, model: str, left_s: float) -> None:
        """In a thread: read ``proc``'s messages until its job's result (dropped) or the job's deadline, then free
        it (or replace it past the deadline or when it died). The job stays counted in :attr:`busy` meanwhile."""

        def drain():
            end = time.perf_counter() + max(left_s, 0.0)
            finished = False
            try:
                while not finished and time.perf_counter() < end:
                    try:
                        kind, *_ = proc.receive(min(end - time.perf_counter(), 1.0))
                    except queue.Empty:
                        continue
                    finished = kind != "progress"
            except (EOFError, OSError, pickle.UnpicklingError):
                pass
            with self._lock:
                self.busy -= 1
                self.drained += 1
            if finished:
                self._release(proc)
            else:
                self._replace(proc, model)

        threading.Thread(target=drain, name=f"normviz-worker-drain-{proc.pid}", daemon=True).start()

    def _submit(self, session, job: Job, names: str, deadline: float, progress) -> Result:
        """Hand ``job`` to a free process and wait for its result (progress passed on), within ``deadline``."""
        from ..core import errors

        if len(self._all) < self.processes:
            self.start()
        proc, waited = self._take(progress, names)
        for _ in range(3):  # a process that died between the check and the send: the job goes to another
            try:
                proc.send(("job", job))
                break
            except OSError:
                self._replace(proc, job.model)
                more, w = self._take(progress, names)
                proc, waited = more, waited + w
        else:
            self._release(proc)
            raise errors.NormvizError(f"The costly-maps worker could not be started for {names}; try again.")
        if waited >= POLL_S:
            session.add_wait(waited)
        with self._lock:
            self.busy += 1
        t0 = time.perf_counter()
        result = None
        try:
            while True:
                left = deadline - (time.perf_counter() - t0)
                if left <= 0:
                    self._replace(proc, job.model)
                    proc = None
                    raise errors.DeadlineError(
                        f"The costly maps {names} did not finish within {deadline:.0f} s (their cost budget with a "
                        "margin) and were stopped. The server may be busy: try again in a while, or with a "
                        "shorter text."
                    )
                try:
                    kind, *payload = proc.receive(min(left, 1.0))
                except queue.Empty:
                    continue
                if kind == "progress":
                    if progress:
                        progress(*payload)
                    continue
                result: Result = payload[0]
                break
        except (EOFError, OSError, pickle.UnpicklingError) as exc:
            self._replace(proc, job.model)
            proc = None
            raise errors.NormvizError(
                f"The costly-maps worker stopped while computing {names} "
                f"({type(exc).__name__}); try again, or with a shorter text."
            ) from None
        finally:
            if proc is not None and result is None:
                # left mid-job by something else, e.g. the progress callback raised (a Streamlit rerun raises
                # at the visitor's next st call, here its progress bar): the process is still computing this
                # job, so it must not take the next one (that one would get this job's arrays)
                self._drain(proc, job.model, deadline - (time.perf_counter() - t0))
            else:
                with self._lock:
                    self.busy -= 1
                if proc is not None:
                    self._release(proc)
        return result

    # ---- one job
    def compute(self, session, family, keys, progress=None):
        """``family``'s ``keys`` of ``session``, computed in a worker process; a ``methods.base.Output``.
        Raises :class:`~normviz.core.errors.DeadlineError` past the job's deadline, NormvizError if the process dies."""
        from ..methods import base

        lm = session.lm
        job = Job(
            model=lm.name,
            device=str(lm.device),
            dtype=str(lm.dtype).replace("torch.", ""),
            cache_key=tuple(lm.cache_key),
            encoded=session.inputs,
            text=session.text,
            text_pair=session.text_pair,
            options=dict(session.options),
            keys=tuple(keys),
        )
        result = self._submit(session, job, ", ".join(keys), self.deadline_s(family, job.options), progress)
        self.ran.append(Ran(family.name, tuple(keys), result.pid, result.seconds))
        _raise(result)
        return base.Output(arrays=result.arrays, notes=result.notes)

    def takes_layers(self, session) -> bool:
        """Whether this worker computes ``session``'s long-text layers (:meth:`layer_maps`; the session asks,
        :func:`normviz.session.long_layers.in_worker`)."""
        return self.long_layers and self._eligible(session)

    def layer_maps(self, session, keys, layer: int, head: int | None = None, progress=None) -> dict:
        """``session.maps(keys, layer, head)`` computed in a worker process, which keeps the last
        ``NORMVIZ_WORKER_SESSIONS`` (default 3) sessions it recorded: a long text's records and its layers'
        α blocks live there, not in the server, and a visitor's next layer is one more job on the same
        records. {key: [n, n] array}; raises as :meth:`compute` does."""
        lm = session.lm
        job = Job(
            model=lm.name,
            device=str(lm.device),
            dtype=str(lm.dtype).replace("torch.", ""),
            cache_key=tuple(lm.cache_key),
            encoded=session.inputs,
            text=session.text,
            text_pair=session.text_pair,
            options=dict(session.options),
            keys=tuple(keys),
            layer=int(layer),
            head=None if head is None else int(head),
        )
        names = f"layer {layer} of this {session.n_tokens:,}-token text"
        result = self._submit(session, job, names, self.layer_deadline_s, progress)
        self.ran.append(Ran("long_layer", tuple(keys), result.pid, result.seconds))
        _raise(result)
        return result.arrays


def _raise(result: Result) -> None:
    """The NormvizError a worker reported, raised here (its class when it is one of normviz.core.errors)."""
    from ..core import errors

    if result.error is not None:
        cls = getattr(errors, result.error[0], None)
        if not (isinstance(cls, type) and issubclass(cls, errors.NormvizError)):
            cls = errors.NormvizError
        raise cls(result.error[1])


def takes_layers(worker, session) -> bool:
    """Whether ``worker`` computes ``session``'s long-text layers (:meth:`HeavyWorker.layer_maps`)."""
    return worker is not None and worker.takes_layers(session)


# ---------------------------------------------------------------- in the worker process
_MODELS = BoundedCache(1)  # (name, device, dtype) -> LoadedModel; the last NORMVIZ_WORKER_MODELS used


def _model(name: str, device: str, dtype: str, cache_key: tuple | None = None):
    from ..models import load

    key = (name, device, dtype)
    lm = _MODELS.pop(key, None)
    if lm is None:
        lm = load(name, device=device, dtype=dtype)
    if cache_key is not None and tuple(lm.cache_key) != tuple(cache_key):
        raise RuntimeError(f"the worker loaded {lm.cache_key}, not the server's {cache_key}")
    _MODELS.max_entries = settings.env("NORMVIZ_WORKER_MODELS")
    _MODELS.put(key, lm)
    return lm


_SESSIONS = BoundedCache(1)  # key -> (session, last used): layer jobs' texts, the last NORMVIZ_WORKER_SESSIONS
_SESSIONS_LOCK = threading.Lock()
WORKER_IDLE_S = 90.0  # a kept session unused this long is dropped (NORMVIZ_WORKER_IDLE_S)


def _session(lm, job: Job):
    """The worker's session of ``job``'s text and its key among the kept ones (None: not kept): kept (the last
    ``NORMVIZ_WORKER_SESSIONS``) for layer jobs, whose next layer reuses its records; a fresh one for
    whole-family jobs (as before)."""
    import hashlib

    from ..session.session import Session

    if job.layer is None:
        return Session.from_inputs(lm, job.encoded, job.text, job.text_pair, job.options), None
    key = (
        tuple(job.cache_key),
        hashlib.sha1(
            pickle.dumps((job.encoded, job.text, job.text_pair, sorted(job.options.items(), key=str)))
        ).hexdigest(),
    )
    with _SESSIONS_LOCK:
        session = _SESSIONS.pop(key, (None,))[0]
        if session is None:
            session = Session.from_inputs(lm, job.encoded, job.text, job.text_pair, job.options)
        _SESSIONS.max_entries = settings.env("NORMVIZ_WORKER_SESSIONS")
        dropped = _SESSIONS.put(key, (session, time.monotonic()))
    if dropped:
        _trim()
    return session, key


def _touch(key) -> None:
    """The kept session ``key`` used until now (its job ended): its idle time counts from the job's end, not
    its start (a layer job of a long text runs for tens of seconds)."""
    with _SESSIONS_LOCK:
        if key in _SESSIONS:
            _SESSIONS.put(key, (_SESSIONS.get(key)[0], time.monotonic()))


def _forget_idle(idle_s: float) -> int:
    """Drop the kept sessions not used for ``idle_s`` seconds (their visitors left): the worker's memory back."""
    now = time.monotonic()
    with _SESSIONS_LOCK:
        old = [k for k, (_, used) in _SESSIONS.items() if now - used > idle_s]
        for k in old:
            _SESSIONS.pop(k)
    if old:
        _trim()
    return len(old)


def _sweep_forever(idle_s: float, every_s: float = 10.0) -> None:
    while True:
        time.sleep(every_s)
        _forget_idle(idle_s)


def _trim() -> None:
    """The freed memory back to the system: ``gc``, the array pool's idle blocks, glibc's ``malloc_trim``."""
    import gc

    from ..core.pool import POOL

    gc.collect()
    POOL.clear()
    try:
        from ..core.memory import libc

        libc().malloc_trim(0)
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass


def _run(job: Job, progress) -> Result:
    from ..core.errors import NormvizError

    t0 = time.perf_counter()
    key = None
    try:
        lm = _model(job.model, job.device, job.dtype, job.cache_key)
        session, key = _session(lm, job)
        if job.layer is not None:
            if progress:
                progress(
                    0.0, f"computing layer {job.layer}" + ("" if session.part.passes else " (recording the text first)")
                )
            maps = session.maps(list(job.keys), job.layer, job.head)
            return Result(dict(maps), {}, None, time.perf_counter() - t0, os.getpid())
        a = session.get(list(job.keys), strict=True, progress=progress)
        arrays = {k: a.arrays[k] for k in job.keys}
        notes = {k: a.notes[k] for k in job.keys if k in a.notes}
        return Result(arrays, notes, None, time.perf_counter() - t0, os.getpid())
    except NormvizError as exc:
        return Result({}, {}, (type(exc).__name__, str(exc)), time.perf_counter() - t0, os.getpid())
    finally:
        if key is not None:
            _touch(key)


PARENT_CHECK_S = 1.0  # how often a worker looks whether the server that started it is still there


def _exit_with_parent(parent: int, every_s: float = PARENT_CHECK_S) -> None:
    """End this process as soon as its parent (the server) is gone: then it is re-parented (``os.getppid()``
    changes). The end of stdin says so too, but only between jobs: a job of minutes ran on, and its memory stayed
    held, after the server was killed (an orphaned ``python -m normviz.workers``, issue 42)."""
    while True:
        time.sleep(every_s)
        if os.getppid() != parent:
            print(f"normviz worker {os.getpid()}: the server ({parent}) is gone; ending", file=sys.stderr)
            os._exit(0)


def serve(parent: int | None = None) -> None:
    """The worker's loop: ("warm", model name) loads a model; ("job", Job) answers ("progress", f, text)…
    then ("result", Result). Ends when stdin closes, or within :data:`PARENT_CHECK_S` of the end of ``parent``
    (the server's pid, ``--parent``; default: this process's parent now), mid-job too. Its stdout carries only
    these messages (prints go to stderr)."""
    parent = os.getppid() if parent is None else int(parent)
    if parent > 1:  # a server that died while this process started up is seen at the first check
        threading.Thread(target=_exit_with_parent, args=(parent,), name="normviz-worker-parent", daemon=True).start()
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    try:
        os.nice(settings.env("NORMVIZ_WORKER_NICE"))
    except (AttributeError, OSError):  # pragma: no cover - platforms without nice
        pass
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    idle = settings.env("NORMVIZ_WORKER_IDLE_S")
    threading.Thread(target=_sweep_forever, args=(idle,), name="normviz-worker-sweep", daemon=True).start()

    def send(message) -> None:
        pickle.dump(message, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()

    while True:
        try:
            kind, payload = pickle.load(inp)
        except EOFError:
            return
        if kind == "warm":
            try:
                _model(payload, "cpu", "float32")
            except Exception as exc:  # a model the worker cannot load: the job will say so
                print(f"normviz worker: could not preload {payload!r}: {exc}", file=sys.stderr)
            continue
        try:
            result = _run(payload, lambda f, m: send(("progress", f, m)))
        except Exception as exc:  # unexpected: the server shows it as a message, never a traceback
            result = Result({}, {}, ("NormvizError", f"{type(exc).__name__}: {exc}"), 0.0, os.getpid())
        send(("result", result))


_SHARED: HeavyWorker | None = None
_SHARED_LOCK = threading.Lock()


def shared_worker(processes: int = 1, long_layers: bool = False) -> HeavyWorker | None:
    """The process-wide worker of the app's server (None when ``processes`` is 0: everything in-process);
    ``long_layers``: long texts' layers go there too (the public app)."""
    global _SHARED
    if processes <= 0:
        return None
    with _SHARED_LOCK:
        if _SHARED is None or _SHARED.processes != processes or _SHARED.long_layers != bool(long_layers):
            if _SHARED is not None:
                _SHARED.shutdown()
            _SHARED = HeavyWorker(processes, long_layers=long_layers)
        return _SHARED


__all__ = ["HeavyWorker", "Job", "Ran", "Result", "heavy_families", "is_heavy", "shared_worker", "takes_layers"]
