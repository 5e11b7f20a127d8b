"""The costly-maps worker cannot hang a visitor: every costly family (flagged HEAVY on its module) runs in the
worker process with the server's results; a job past its deadline (its cost budget with a margin) is killed,
replaced and reported as a DeadlineError while the next visitor is served; a worker that died while idle is
replaced without anyone seeing an error."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import normviz
from normviz.core.errors import DeadlineError
from normviz.workers.process import HeavyWorker, heavy_families

SHORT = "The cat sat on the mat, and the dog watched it."
LONG = (
    "The committee met on a cold morning in the old town hall to discuss the budget for the coming year, and "
    "after a long debate the members agreed to postpone the vote."
)
COSTLY = ["ff_res", "value_zeroing", "alti", "effective_attention", "flow", "globenc_layer", "decompx"]


@pytest.fixture(scope="module")
def worker():
    w = HeavyWorker(1, min_tokens=0).start(warm_model="minilm")
    yield w
    w.shutdown()


def test_the_costly_keys_cover_every_heavy_family():
    assert {normviz.methods.family_of(k).name for k in COSTLY} == set(heavy_families())


@pytest.mark.parametrize("key", COSTLY)
def test_each_costly_family_runs_in_the_worker_with_the_servers_result(minilm, worker, key):
    family = normviz.methods.family_of(key)
    alone = normviz.Session(minilm, SHORT).get([key])
    before = len(worker.ran)
    got = normviz.Session(minilm, SHORT, worker=worker).get([key])
    ran = [r for r in list(worker.ran)[before:] if key in r.keys]
    assert len(ran) == 1 and ran[0].family == family.name
    assert ran[0].pid in {p.pid for p in worker._all} and ran[0].pid != os.getpid()
    # the worker runs one thread, the server its own count: float32 sums in another order differ by a few ulps
    # (1.7e-6 relative seen on a host whose BLAS splits the work differently), so relative, not 1e-6 absolute on
    # values up to ~10; a wrong map differs by orders more
    np.testing.assert_allclose(got[key], alone[key], rtol=1e-5, atol=1e-6)


def test_a_job_past_its_deadline_is_killed_replaced_and_reported(minilm):
    worker = HeavyWorker(1, min_tokens=0, deadline_factor=1.0, deadline_grace_s=4.0).start(warm_model="minilm")
    try:
        normviz.Session(minilm, SHORT, worker=worker).get(["value_zeroing"])  # loaded and answering
        stopped_pid = worker._all[0].pid
        budget = {"value_zeroing_budget_s": 2.0}  # deadline 4 + 1 × 2 s
        assert worker.deadline_s(normviz.methods.family_of("value_zeroing"), budget) == 6.0
        out, messages, took = {}, [], {}

        def first():
            t0 = time.perf_counter()
            s = normviz.Session(minilm, "Stopped. " + LONG, options=budget, worker=worker)
            try:
                s.get(["attention", "value_zeroing"], strict=True)
            except DeadlineError as exc:
                out["first"] = exc
            took["first"] = time.perf_counter() - t0

        def second():  # another visitor queued behind the stopped job is served once it is killed
            s = normviz.Session(minilm, "Queued. " + LONG, worker=worker)
            out["second"] = s.get(["value_zeroing"], progress=lambda f, m: messages.append(m))

        a = threading.Thread(target=first)
        a.start()
        deadline = time.time() + 60
        while worker.busy == 0 and time.time() < deadline:
            time.sleep(0.005)
        os.kill(stopped_pid, signal.SIGSTOP)  # mid-job: it will never answer
        b = threading.Thread(target=second)
        b.start()
        a.join(60)
        b.join(120)
        assert not a.is_alive() and not b.is_alive()
        assert "did not finish within 6 s" in str(out["first"])  # a message for the visitor, not a traceback
        assert took["first"] < 40, took
        assert worker.replaced == 1 and stopped_pid not in {p.pid for p in worker._all}
        with pytest.raises(ProcessLookupError):
            os.kill(stopped_pid, 0)  # killed and reaped, not left stopped
        alone = normviz.Session(minilm, "Queued. " + LONG).get(["value_zeroing"])["value_zeroing"]
        np.testing.assert_allclose(out["second"]["value_zeroing"], alone, rtol=0, atol=1e-6)
        assert any("waiting for another visitor" in m for m in messages)
    finally:
        worker.shutdown()


def test_a_worker_that_died_while_idle_is_replaced_unseen(minilm):
    worker = HeavyWorker(1, min_tokens=0).start(warm_model="minilm")
    try:
        first = normviz.Session(minilm, SHORT, worker=worker).get(["alti"])
        proc = worker._all[0]
        proc.proc.kill()
        proc.proc.wait(10)
        again = normviz.Session(minilm, SHORT + " Again.", worker=worker).get(["alti"], strict=True)
        assert worker.replaced == 1 and worker.ran[-1].pid != proc.pid
        assert again["alti"].shape[0] == first["alti"].shape[0]
    finally:
        worker.shutdown()


class Interrupted(BaseException):
    """What Streamlit's RerunException is: a BaseException, raised at the visitor's next st call (here: from the
    progress callback, which draws the progress bar)."""


def test_a_job_its_caller_left_mid_way_does_not_answer_the_next_job(minilm, worker):
    """A visitor's rerun once left a job mid-way: its process went back to the free ones still computing, and the
    next job (another visitor's, another text) got the arrays of the left one. Now it is drained first."""
    normviz.Session(minilm, SHORT, worker=worker).get(["value_zeroing"])  # loaded and answering
    drained, replaced = worker.drained, worker.replaced
    seen = []

    def leave_mid_job(fraction, message):
        seen.append(message)
        if worker.busy:  # a job is in flight in the worker: leave it there
            raise Interrupted

    with pytest.raises(Interrupted):
        normviz.Session(minilm, "Left here. " + SHORT, worker=worker).get(["value_zeroing"], progress=leave_mid_job)
    assert seen
    text = "Next."  # another length: the left job's arrays cannot pass for this one's
    got = normviz.Session(minilm, text, worker=worker).get(["value_zeroing"])["value_zeroing"]
    alone = normviz.Session(minilm, text).get(["value_zeroing"])["value_zeroing"]
    assert got.shape == alone.shape
    np.testing.assert_allclose(got, alone, rtol=0, atol=1e-6)
    assert worker.drained == drained + 1 and worker.replaced == replaced and worker.busy == 0
