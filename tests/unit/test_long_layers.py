"""Issue 40 item 2: the worker-or-local decision for a long text's layer lives in the session layer
(:mod:`normviz.session.long_layers`); the UI's ``long_maps`` only asks for a layer. Stand-ins for the session and
the worker check the routing, the per-key refusals and the kept layers (the real worker:
tests/reliability/test_long_worker.py)."""

from __future__ import annotations

import types

import numpy as np

from normviz.core.errors import TooCostlyError
from normviz.session import long_layers
from normviz.ui.views import long_maps


class Worker:
    def __init__(self, takes: bool):
        self.takes, self.jobs = takes, []

    def takes_layers(self, session) -> bool:
        return self.takes

    def layer_maps(self, session, keys, layer, head, progress=None):
        self.jobs.append((tuple(keys), layer, head))
        return {k: np.full((3, 3), 10.0 * layer + len(k)) for k in keys}


class Session:
    """What long_layers reads of a session: its worker, its layer count, ``maps`` in this process."""

    def __init__(self, worker=None, refuse=()):
        self.worker, self.refuse, self.local = worker, set(refuse), []
        self.request = types.SimpleNamespace(n_layers=4)

    def maps(self, keys, layer, head):
        if self.refuse & set(keys):
            raise TooCostlyError(f"{sorted(self.refuse & set(keys))[0]} is too costly")
        self.local.append(tuple(keys))
        return {k: np.full((3, 3), float(layer)) for k in keys}


def test_without_a_worker_that_takes_layers_the_layer_is_computed_here():
    for worker in (None, Worker(False)):
        s = Session(worker)
        assert not long_layers.in_worker(s)
        got, refused = long_layers.layer_maps(s, ["norm", "attention"], 2, None)
        assert refused == {} and s.local == [("norm", "attention")] and float(got["norm"][0, 0]) == 2.0
        assert worker is None or worker.jobs == []


def test_a_refused_key_does_not_stop_the_others():
    s = Session(refuse=["ff"])
    got, refused = long_layers.layer_maps(s, ["norm", "ff"], 1, None)
    assert list(got) == ["norm"] and "too costly" in refused["ff"]


def test_a_worker_that_takes_layers_computes_them_and_a_layer_seen_again_is_no_job():
    w = Worker(True)
    s = Session(w)
    assert long_layers.in_worker(s) and long_maps.remote(s)  # the UI asks the session's decision
    got, refused = long_maps.layer_maps(s, ["norm"], -1, 0)  # -1: the last layer, kept under its index 3
    assert refused == {} and s.local == [] and w.jobs == [(("norm",), 3, 0)]
    assert float(got["norm"][0, 0]) == 34.0 and not got["norm"].flags.writeable
    again, _ = long_layers.layer_maps(s, ["norm"], 3, 0)
    assert w.jobs == [(("norm",), 3, 0)] and again["norm"] is got["norm"]
