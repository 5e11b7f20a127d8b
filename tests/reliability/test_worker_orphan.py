"""A worker process ends when the server that started it is gone (issue 42: workers ended only on reading the end
of their stdin, between jobs, so a job of minutes ran on after the server was killed, its memory held). A server
stand-in starts a HeavyWorker, a second process keeps the worker's stdin open (as a job in progress keeps the
worker from reading it: no end-of-input reaches it), the stand-in is killed with SIGKILL (no atexit, no shutdown):
the worker must be gone within a few seconds (once it is serving: a worker still importing torch -- a C import
holding the interpreter -- ends when that import is done)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psutil

from normviz.workers import process

CHECK_S = getattr(process, "PARENT_CHECK_S", 1.0)

PARENT = textwrap.dedent("""
    import subprocess, sys, time
    from normviz.workers.process import HeavyWorker
    w = HeavyWorker(1, min_tokens=0).start()
    p = w._all[0]
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"],
                              pass_fds=[p.proc.stdin.fileno()])
    p.send(("warm", "no-such-model"))  # answered on stderr ("could not preload") once its loop runs
    print(p.pid, holder.pid, flush=True)
    time.sleep(600)
""")


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_worker_ends_within_seconds_of_its_servers_death():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    err: list[str] = []
    threading.Thread(target=lambda: err.extend(iter(parent.stderr.readline, "")), daemon=True).start()
    holder = None
    try:
        worker, holder = (int(x) for x in parent.stdout.readline().split())
        t0 = time.monotonic()  # the worker is serving (its loop answered): torch imported, its check running
        while "could not preload" not in "".join(err) and time.monotonic() - t0 < 180:
            time.sleep(0.2)
        assert "could not preload" in "".join(err), err
        time.sleep(CHECK_S)
        assert not _gone(worker) and psutil.Process(worker).ppid() == parent.pid
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(10)
        t0 = time.monotonic()
        while not _gone(worker) and time.monotonic() - t0 < 30:
            time.sleep(0.1)
        ended = time.monotonic() - t0
        assert _gone(worker), "the orphaned worker is still running 30 s after its server was killed"
        assert ended < 3 * CHECK_S + 2, ended
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in (holder,) if holder else ():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
