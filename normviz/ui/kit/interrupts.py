"""At most one run of a visitor's script at a time, and a computation that has started finishes first.

How Streamlit (1.67) handles a rerun request that arrives while the visitor's script runs
(``runtime/app_session.py`` ``request_rerun``): with ``runner.fastReruns`` (its default) it asks the running
script to stop and starts a new script thread at once, for the same session. The old thread stops only at its
next ``st`` call (each one checks for a request and raises ``StopException``/``RerunException``), so during
normviz work between two ``st`` calls (a recording pass, a map family, a job in the costly-maps worker, a model
load, building frames) a burst of N slider moves started N script threads of one visitor side by side. (Without
fastReruns the request is merged into one pending request, the latest widget values winning, and the running
script is interrupted at its next ``st`` call.)

:func:`one_run_per_session` (around every page's body, ``ui.page.run_page``; on with ``NORMVIZ_ONE_RUN=1``, see
:func:`guard_enabled`): a run waits until the session's previous run has left, polling a yield point meanwhile,
so a run that a newer request stopped while it waited leaves at once without doing anything. A burst of N
reruns thus costs the run in flight plus the latest one.

:func:`deferred_interrupts`: the progress callbacks of a computation update a progress bar, and that ``st`` call
is where the interruption lands: in the middle of the computation. The work done so far was then lost (the next
run started it again) and a worker job kept running in its process with nobody reading its answer. A progress
callback wrapped by it catches Streamlit's interruption, stops drawing, and the interruption is raised again once
the computation returned (its results are then kept in the shared session), so the latest request runs next
and finds them.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Callable

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

from ...core import settings
from . import timing

GUARD_KEY = "_normviz_run_guard"  # the session's lock, kept in its session state
POLL_S = 0.05
WAIT_S = 900.0  # past this (a run stuck for 15 minutes) the next run goes ahead anyway
_CREATE = threading.Lock()
runs_waited = 0  # runs that found the session's previous run still going (this process)


def guard_enabled() -> bool:
    """``NORMVIZ_ONE_RUN=1`` turns :func:`one_run_per_session` on. Off by default for now: with it on, the
    real-browser redraw test (tests/app/test_app_browser.py) once read a panel whose chart was gone during a
    layer change ("Cannot read properties of null (reading 'layout')"), not yet understood (issue 22)."""
    return settings.flag("NORMVIZ_ONE_RUN")


@contextlib.contextmanager
def one_run_per_session(wait_s: float = WAIT_S):
    """Hold the visitor's session lock for the block; wait for it while polling Streamlit's yield point, where a
    run stopped by a newer request raises and leaves. Outside a script run (no context) it does nothing."""
    global runs_waited
    if get_script_run_ctx(suppress_warning=True) is None or not guard_enabled():
        yield
        return
    with _CREATE:
        lock = st.session_state.get(GUARD_KEY)
        if lock is None:
            lock = st.session_state[GUARD_KEY] = threading.Lock()
    t0 = time.perf_counter()
    held = lock.acquire(blocking=False)
    try:
        if not held:
            runs_waited += 1
            deadline = time.monotonic() + wait_s
            while not held and time.monotonic() < deadline:
                st.session_state.get(GUARD_KEY)  # a yield point: raises if a newer request stopped this run
                held = lock.acquire(timeout=POLL_S)
        st.session_state.get(GUARD_KEY)  # stopped while it waited: leave before doing anything
    except ScriptControlException:
        timing.report("run", "left-waiting", f"{time.perf_counter() - t0:.4f}")
        if held:
            lock.release()
        raise
    timing.report("run", "entered", f"{time.perf_counter() - t0:.4f}")
    try:
        yield
    finally:
        if held:
            lock.release()


class DeferredInterrupt:
    """Holds the first Streamlit interruption (rerun or stop) raised inside a wrapped callback."""

    def __init__(self):
        self.pending: ScriptControlException | None = None

    def wrap(self, callback: Callable) -> Callable:
        """``callback`` that swallows (and keeps) a ``ScriptControlException``, and does nothing after one."""

        def wrapped(*args, **kwargs):
            if self.pending is not None:
                return None
            try:
                return callback(*args, **kwargs)
            except ScriptControlException as exc:
                self.pending = exc
                return None

        wrapped.stopped = lambda: self.pending is not None  # a job not started yet is dropped (workers.process)
        return wrapped


@contextlib.contextmanager
def deferred_interrupts():
    """``with deferred_interrupts() as d: compute(progress=d.wrap(draw))``: an interruption caught by ``draw``
    is raised when the block ends, in place of an error the block raised (the visitor has moved on)."""
    d = DeferredInterrupt()
    try:
        yield d
    except Exception:
        if d.pending is not None:
            raise d.pending from None
        raise
    if d.pending is not None:
        raise d.pending
