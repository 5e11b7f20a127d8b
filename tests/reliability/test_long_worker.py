"""Long texts' layers in the worker process (issue 29: three concurrent 4,000-token pastes slowed other visitors'
minilm reruns to 2.6–9.5 s, their layers computed in the server's threads): with a worker that takes long
layers, Explore's layer maps come from it with the numbers the server would compute, the server records
nothing, the worker keeps the text's records for the next layer, and a layer seen again is no job."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.ui.views import long_maps
from normviz.workers.process import HeavyWorker, takes_layers

SENTENCE = "The river rose in the night and the town woke to water in the streets. "
TEXT = SENTENCE * 19 + "A zebra crossed the bridge. "  # ~ 300 minilm tokens: a long text on Explore
KEYS = ["attention", "norm", "norm_layer", "attn_res"]


@pytest.fixture(scope="module")
def worker():
    w = HeavyWorker(1, min_tokens=0, long_layers=True).start(warm_model="minilm")
    yield w
    w.shutdown()


def test_a_long_layer_is_computed_in_the_worker_with_the_servers_numbers(minilm, worker):
    session = normviz.Session(minilm, TEXT, max_tokens=400, worker=worker)
    assert long_maps.is_long(session.n_tokens) and long_maps.remote(session)
    before = len(worker.ran)
    got, refused = long_maps.layer_maps(session, KEYS, 2, None)
    assert not refused and session.part.passes == 0  # the server recorded nothing
    ran = list(worker.ran)[before:]
    assert [r.family for r in ran] == ["long_layer"] and ran[0].pid in {p.pid for p in worker._all}
    alone = normviz.Session(minilm, TEXT, max_tokens=400).maps(KEYS, 2, None)
    for k in KEYS:
        np.testing.assert_allclose(got[k], alone[k], rtol=0, atol=1e-6, err_msg=k)
    first = ran[0].seconds
    got3, _ = long_maps.layer_maps(session, KEYS, 3, 1)  # the next layer: the worker's records reused
    again, _ = long_maps.layer_maps(session, KEYS, 2, None)  # a layer seen again: kept here, no job
    ran = list(worker.ran)[before:]
    assert len(ran) == 2 and all(again[k] is got[k] for k in KEYS)
    assert ran[1].seconds < first  # no second recording (the first job recorded the text)
    alone3 = normviz.Session(minilm, TEXT, max_tokens=400).maps(KEYS, 3, 1)
    for k in KEYS:
        np.testing.assert_allclose(got3[k], alone3[k], rtol=0, atol=1e-6, err_msg=k)


def test_a_refused_or_wrong_layer_is_a_message_from_the_worker(minilm, worker):
    session = normviz.Session(minilm, TEXT, max_tokens=400, worker=worker)
    got, refused = long_maps.layer_maps(session, ["norm"], 99, None)
    assert not got and "out of range" in refused["norm"]


def test_only_a_worker_that_takes_long_layers_gets_them(minilm):
    session = normviz.Session(minilm, TEXT, max_tokens=400)
    assert not takes_layers(None, session)
    assert not takes_layers(HeavyWorker(1), session)  # the default (not the public app): in the server
    assert takes_layers(HeavyWorker(1, long_layers=True), session)
