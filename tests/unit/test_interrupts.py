"""ui.interrupts: Streamlit's interruption (a rerun or stop request, raised at the next st call) caught in a
progress callback waits until the computation returned, then is raised; nothing is swallowed."""

from __future__ import annotations

import pytest
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException, StopException
from streamlit.runtime.scriptrunner_utils.script_requests import RerunData

from normviz.ui.kit.interrupts import deferred_interrupts


def computation(progress, steps: int = 5, fail: bool = False):
    done = []
    for i in range(steps):
        progress(i / steps, f"step {i}")
        done.append(i)
    if fail:
        raise ValueError("the computation failed")
    return done


def test_a_rerun_raised_by_the_progress_bar_waits_for_the_computation():
    drawn, result = [], {}

    def draw(fraction, message):
        drawn.append(message)
        if len(drawn) == 2:  # the bar's second update finds a rerun request pending
            raise RerunException(RerunData(query_string="layer=5"))

    with pytest.raises(RerunException) as caught:
        with deferred_interrupts() as d:
            result["done"] = computation(d.wrap(draw))
    assert result["done"] == [0, 1, 2, 3, 4]  # finished, not cut at step 1
    assert drawn == ["step 0", "step 1"]  # no drawing after the interruption
    assert caught.value.rerun_data.query_string == "layer=5"  # the request itself, raised after the block


def test_the_interruption_replaces_an_error_of_the_computation_and_other_errors_pass():
    def stop(fraction, message):
        raise StopException()

    with pytest.raises(StopException):
        with deferred_interrupts() as d:
            computation(d.wrap(stop), fail=True)
    with pytest.raises(ValueError):
        with deferred_interrupts() as d:
            computation(d.wrap(lambda f, m: None), fail=True)
    with deferred_interrupts() as d:
        assert computation(d.wrap(lambda f, m: None)) == [0, 1, 2, 3, 4]
    assert d.pending is None
