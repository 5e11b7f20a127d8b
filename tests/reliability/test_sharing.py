"""Fair sharing of one server: passes of several threads through the shared model overlap (no lock around
them) without mixing; the costly families run in a worker process with the same results; a request that
waits is told so; every costly family refuses past its budget before anything runs."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import normviz
from normviz.workers.process import HeavyWorker

SHORT = "The cat sat on the mat, and the dog watched it."
OTHER = "Rain fell all night on the quiet little harbour town."
LONG = (
    "The committee met on a cold morning in the old town hall to discuss the budget for the coming year, and "
    "after a long debate the members agreed to postpone the vote."
)
HEAVY = ["ff_res", "value_zeroing", "alti", "effective_attention", "globenc_layer"]


@pytest.fixture(scope="module")
def lm():
    return normviz.load("minilm")


def _records(lm, text):
    return [r.rec for r in normviz.Session(lm, text).layers()]


def _same_records(a, b):
    for ra, rb in zip(a, b):
        for name in ("x", "attn", "z_attn", "z_ff", "out"):
            np.testing.assert_allclose(getattr(ra, name).numpy(), getattr(rb, name).numpy(), rtol=0, atol=1e-5)


def _run_inside(lm, module, action, timeout=120.0):
    """While this thread's pass is inside ``module``, run ``action`` in another thread and wait for it; returns
    whether it finished (it cannot while a lock is held around this thread's pass)."""
    me = threading.get_ident()
    finished = []

    def hook(mod, args):
        if threading.get_ident() == me and not finished:
            t = threading.Thread(target=lambda: finished.append(action()))
            t.start()
            t.join(timeout)
            finished.append(not t.is_alive())

    return module.register_forward_pre_hook(hook), finished


def test_two_recording_passes_overlap_and_keep_their_own_records(lm):
    ref_short, ref_other = _records(lm, SHORT), _records(lm, OTHER)
    handle, finished = _run_inside(lm, lm.layers[2], lambda: _records(lm, OTHER))
    try:
        mine = _records(lm, SHORT)
    finally:
        handle.remove()
    assert finished[-1] is True, "the other visitor's pass waited for this one"
    _same_records(mine, ref_short)
    _same_records(finished[0], ref_other)


def test_value_zeroing_and_another_pass_overlap_without_mixing(lm):
    ref = normviz.Session(lm, SHORT).get(["value_zeroing"])["value_zeroing"]
    ref_other = _records(lm, OTHER)
    session = normviz.Session(lm, SHORT)
    session.layers()  # recorded before: the hook below fires in value zeroing's reruns
    handle, finished = _run_inside(lm, lm.layers[3], lambda: _records(lm, OTHER))
    try:
        got = session.get(["value_zeroing"])["value_zeroing"]
    finally:
        handle.remove()
    assert finished[-1] is True, "the other pass waited for value zeroing"
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6)
    _same_records(finished[0], ref_other)


def test_a_hook_called_by_another_thread_without_its_kwargs_does_nothing():
    """torch may call a with_kwargs pre-hook without kwargs when its owner removed it meanwhile."""
    from normviz.record.recorder import owner_only

    calls = []
    hook = owner_only(lambda module, args, kwargs: calls.append(1))
    out = []
    t = threading.Thread(target=lambda: out.append(hook(None, ())))
    t.start()
    t.join()
    assert out == [None] and calls == []
    hook(None, (), {})
    assert calls == [1]


def test_costly_families_in_the_worker_give_the_same_maps_and_waits_are_reported(lm):
    worker = HeavyWorker(1)
    try:
        alone = normviz.Session(lm, LONG).get(HEAVY + ["norm"])
        session = normviz.Session(lm, LONG, worker=worker)
        assert session.n_tokens >= worker.min_tokens
        got = session.get(HEAVY + ["norm"])
        for k in HEAVY + ["norm"]:
            np.testing.assert_allclose(got[k], alone[k], rtol=0, atol=1e-6)
        assert set(got.notes) == set(alone.notes)
        # two visitors' costly maps at once: one process, so the second waits, is told so, and counts the wait
        results, messages = {}, []

        def visitor(i):  # the first one's text is long (seconds of value zeroing), the second starts meanwhile
            text = f"Visitor {i}. " + (LONG + " ") * (3 if i == 0 else 1)
            s = normviz.Session(lm, text, worker=worker)
            results[i] = s.get(["value_zeroing"], progress=lambda f, m: messages.append(m))

        first = threading.Thread(target=visitor, args=(0,))
        first.start()
        deadline = time.time() + 120
        while worker.busy == 0 and time.time() < deadline:
            time.sleep(0.01)
        second = threading.Thread(target=visitor, args=(1,))
        second.start()
        first.join()
        second.join()
        waits = [results[0].waited_s, results[1].waited_s]
        assert waits[0] == 0 and waits[1] >= 0.25, waits
        assert any("waiting for another visitor" in m for m in messages)
        # a short text stays in the server: a round trip would cost more than its costly maps
        short = normviz.Session(lm, SHORT, worker=worker)
        assert not worker.takes(short, normviz.methods.family_of("ff_res"), ["ff_res"])
    finally:
        worker.shutdown()


def test_a_worker_that_dies_is_a_message_and_is_replaced(lm):
    worker = HeavyWorker(1).start(warm_model="minilm")
    try:
        proc = worker._all[0]
        errors = []

        def go():
            try:
                normviz.Session(lm, "Once more. " + LONG, worker=worker).get(["value_zeroing"])
            except normviz.core.errors.NormvizError as exc:
                errors.append(str(exc))

        t = threading.Thread(target=go)
        t.start()
        deadline = time.time() + 120  # kill it mid-job: a process that dies while idle is replaced unseen
        while worker.busy == 0 and time.time() < deadline:  # (a fixed 1-s sleep killed it before the job
            time.sleep(0.01)  # under load: no error then)
        proc.proc.kill()
        t.join(120)
        assert errors and "worker stopped" in errors[0]
        a = normviz.Session(lm, "And again. " + LONG, worker=worker).get(["value_zeroing"])
        assert a["value_zeroing"].shape[0] == lm.n_layers
    finally:
        worker.shutdown()


BUDGETS = [
    ("ff_res", "ff_budget_s"),
    ("value_zeroing", "value_zeroing_budget_s"),
    ("alti", "alti_budget_s"),
    ("effective_attention", "effective_budget_s"),
    ("globenc_layer", "globenc_budget_s"),
    ("flow", "flow_max_work"),
]


@pytest.mark.parametrize("key,option", BUDGETS)
def test_every_costly_family_refuses_past_its_budget_before_anything_runs(lm, key, option):
    session = normviz.Session(lm, LONG, options={option: 1e-9})
    assert option in (session.refusal(key) or "")
    a = session.get(["attention", key], strict=False)
    assert key in a.refused and "attention" in a
    assert normviz.Session(lm, LONG, options={option: 1e-9}).forward_passes == 0
    with pytest.raises(normviz.core.errors.TooCostlyError):
        normviz.Session(lm, LONG, options={option: 1e-9}).get([key])


def test_every_family_with_a_budget_is_a_heavy_one():
    from normviz.workers.process import heavy_families, is_heavy

    for key, option in BUDGETS + [("decompx", "decompx_budget_s")]:
        family = normviz.methods.family_of(key)
        assert is_heavy(family) and family.name in heavy_families()
        if option != "flow_max_work":  # the worker's deadline reads the same budget as the cost check
            assert family.budget.seconds({option: 7.0}) == 7.0
    assert all(is_heavy(normviz.methods.families()[name]) for name in heavy_families())
    assert not is_heavy(normviz.methods.family_of("norm"))


def test_the_page_says_how_long_a_request_waited():
    from streamlit.testing.v1 import AppTest

    def page():
        from types import SimpleNamespace

        from normviz.ui.kit import st_parts

        st_parts.notice_waited(SimpleNamespace(waited_s=3.25))
        st_parts.notice_waited(SimpleNamespace(waited_s=0.1))

    at = AppTest.from_function(page).run(timeout=60)
    assert [i.value for i in at.info] == [
        "This analysis waited 3.2 s for other visitors' analyses before it could run "
        "(the server computes costly maps one visitor at a time)."
    ]


@pytest.mark.parametrize("raw,expect", [("abc", 1), ("-1", 0), ("9", 4), ("2", 2), ("0", 0)])
def test_the_heavy_workers_setting_is_validated(raw, expect):
    from normviz.ui.kit.settings import load_settings

    s = load_settings({"NORMVIZ_HEAVY_WORKERS": raw})
    assert s.heavy_workers == expect
    assert bool(s.problems) == (raw in ("abc", "-1", "9"))
    assert all("NORMVIZ_HEAVY_WORKERS" in p for p in s.problems)


def test_an_encoder_decoders_costly_maps_go_to_the_worker_too():
    """The worker rebuilds an encoder–decoder session from Session.inputs and computes its spelled keys
    (encoder_ff_res …), equal to the server's own; the decoder's and cross keys stay in the server."""
    toy = normviz.load("toy-mt")
    src = "the big dog often sees a small red car and the cat sees a big dog"
    worker = HeavyWorker(1, min_tokens=1).start(warm_model="toy-mt")
    jobs = []
    real = worker.compute
    worker.compute = lambda session, family, keys, progress=None: (
        jobs.append(tuple(keys)) or real(session, family, keys, progress)
    )
    try:
        keys = ["encoder_ff_res", "encoder_alti", "decoder_norm", "cross_norm"]
        got = normviz.Session(toy, src, target="mao vidas un inu", worker=worker).get(keys)
        alone = normviz.Session(toy, src, target="mao vidas un inu").get(keys)
        for k in keys:  # float32, one thread there: to float32's rounding
            np.testing.assert_allclose(got[k], alone[k], rtol=1e-5, atol=1e-6)
        assert sorted(map(sorted, jobs)) == [["encoder_alti"], ["encoder_ff", "encoder_ff_res", "encoder_ff_res_ln"]]
        assert not any(k.startswith(("decoder_", "cross_")) for job in jobs for k in job)
    finally:
        worker.shutdown()
