"""A burst of reruns from one visitor, through a real server and a raw websocket visitor (``-m slow``): 20 layer
changes fired without waiting, while the visitor's new sentence is being computed (its costly map in the worker
process), cost one computation of that sentence's maps, a few script runs (not 21), and end on the view last
asked for, equal to that view opened alone. The server counts its script runs and computations on stderr
(``NORMVIZ_TIMING=1``, :mod:`normviz.ui.kit.timing`)."""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
MAPS = "attention,norm,value_zeroing"  # value_zeroing: a costly family, in the worker from 24 tokens on
FIRST = (
    "The committee met on a cold morning in the old town hall to discuss the budget for the coming year, "
    "and the members agreed to wait."
)
SECOND = (
    "A small boat crossed the wide grey river at dawn while the fishermen on the bank mended their nets and "
    "talked about the storm."
)
LAYERS = [(k * 5) % 6 for k in range(1, 21)]  # 5, 4, 3, 2, 1, 0, 5, … : the last asked for is 0


def _server_lines(log: Path, kind: str, session: str = "") -> list[list[str]]:
    """The fields after ``normviz-<kind>`` (time, session, …) of each such line (of one session if given)."""
    rows = [line.split()[1:] for line in log.read_text().splitlines() if line.startswith(f"normviz-{kind} ")]
    return [r for r in rows if not session or r[1] == session]


def test_a_burst_of_layer_changes_during_a_computation_costs_one_computation(tmp_path):
    from bench_load import heatmap_zs
    from ws_visitor import Visitor

    from tests.helpers.browser import streamlit_server

    log = tmp_path / "server.log"
    env = {"NORMVIZ_PUBLIC": "1", "NORMVIZ_TIMING": "1", "NORMVIZ_ONE_RUN": "1"}  # the guard: ui.interrupts
    with streamlit_server(env, log_path=str(log)) as url:
        v = Visitor(url)
        first = v.open(urllib.parse.urlencode({"model": "minilm", "text": FIRST, "maps": MAPS}))
        assert first.exceptions == 0 and len(heatmap_zs(first)) >= 3, first.alerts
        session = _server_lines(log, "timing")[-1][1]  # this visitor's (the only one so far)
        before = {k: len(_server_lines(log, k, session)) for k in ("timing", "compute", "run")}
        v.send_widget("w_text", string_value=SECOND)
        started = v.wait_for_element("progress")  # the new sentence's maps are being computed
        assert started.elements[-1] == "progress"
        for layer in LAYERS:
            v.send_widget("w_layer", double_array_value=[float(layer)])
        runs = v.runs_until_finished()
        v.close()
        assert runs[-1].status == "FINISHED_SUCCESSFULLY" and runs[-1].exceptions == 0, runs[-1].alerts
        script_runs = _server_lines(log, "timing", session)[before["timing"] :]
        computes = _server_lines(log, "compute", session)[before["compute"] :]
        bodies = _server_lines(log, "run", session)[before["run"] :]
        entered = [b for b in bodies if b[2] == "entered"]
        print(
            "burst:",
            len(LAYERS),
            "layer changes;",
            len(script_runs),
            "script runs,",
            len(entered),
            "entered the page's body; computations:",
            computes,
        )
        assert len(computes) == 1 and "value_zeroing" in computes[0][2].split(","), computes  # once, not restarted
        assert computes[0][3] in ("done", "deferred"), computes
        # the run in flight, then the latest (+ one of slack: a request may land between two runs); the others
        # left while they waited, before doing any work
        assert 2 <= len(entered) <= 3, bodies
        assert all(float(b[3]) < 60 for b in bodies if b[2] == "left-waiting")
        alone = Visitor(url)
        want = alone.open(
            urllib.parse.urlencode({"model": "minilm", "text": SECOND, "maps": MAPS, "layer": LAYERS[-1]})
        )
        alone.close()
    got_zs, want_zs = heatmap_zs(runs[-1]), heatmap_zs(want)
    assert len(got_zs) == len(want_zs) >= 3
    for a, b in zip(got_zs, want_zs):  # the view last asked for: the same numbers as that view opened alone
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
