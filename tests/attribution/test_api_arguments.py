"""Issue 29: the prediction API refuses what it used to coerce silently — ``predict(top=0)`` / ``top=-1`` gave
one candidate, ``position=1.5`` was read as 1, ``Routes.above(nan)`` gave an empty graph — each now a
:class:`normviz.core.errors.InputError` saying what to give (property tests over the values)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import normviz
from normviz.attribution.predict import whole_number
from normviz.core.errors import InputError

from ..helpers import tiny

N = 7
FAST = settings(max_examples=40, deadline=None)


@pytest.fixture(scope="module")
def session(head_model):
    return normviz.Session.from_encoded(head_model("gpt2"), [tiny.encoded(n=N, seed=1)])[0]


@pytest.fixture(scope="module")
def graph(session):
    return normviz.routes(session, threshold=0.0)


@FAST
@given(top=st.integers(max_value=0))
def test_predict_refuses_top_below_one(session, top):
    with pytest.raises(InputError, match="top must be 1 or more"):
        session.predict(top=top)


@FAST
@given(top=st.integers(min_value=1, max_value=200))
def test_predict_lists_top_candidates_or_the_whole_vocabulary(session, top):
    got = session.predict(top=top)
    assert len(got) == min(top, 97)  # tiny vocabulary: 97
    assert all(a.logit >= b.logit for a, b in zip(got, got[1:]))


@FAST
@given(position=st.floats(allow_nan=True, allow_infinity=True).filter(lambda x: not float(x).is_integer()))
def test_positions_that_are_not_whole_numbers_are_refused(session, position):
    for call in (
        lambda: session.predict(top=2, position=position),
        lambda: session.logit_lens(position=position),
        lambda: session.explain(position=position),
        lambda: normviz.routes(session, position=position),
    ):
        with pytest.raises(InputError, match="position must be a whole number"):
            call()


@FAST
@given(position=st.integers(min_value=-N, max_value=N - 1))
def test_whole_positions_in_any_spelling_mean_the_same_token(session, position):
    want = session.predict(top=1, position=position)[0]
    for spelling in (float(position), np.int64(position), str(position), torch.tensor(position)):
        assert session.predict(top=1, position=spelling)[0] == want


@pytest.mark.parametrize("bad", [True, "two", "1.5", None, [1], torch.tensor(1.5), math.nan])
def test_whole_number_refuses_what_is_not_one(bad):
    with pytest.raises(InputError, match="whole number"):
        whole_number(bad, "top")


@FAST
@given(
    tau=st.one_of(st.just(math.nan), st.floats(max_value=-1e-12), st.floats(min_value=1.0), st.just("0.1x"), st.none())
)
def test_routes_above_refuses_thresholds_outside_zero_one(graph, tau):
    with pytest.raises(InputError, match="threshold"):
        graph.above(tau)


def test_routes_above_cannot_lower_the_threshold(session):
    with pytest.raises(InputError, match="can only rise"):
        normviz.routes(session, threshold=0.1).above(0.05)


@FAST
@given(tau=st.floats(min_value=0.0, max_value=0.999))
def test_routes_above_keeps_the_reached_edges_over_the_threshold(graph, tau):
    sub = graph.above(tau)
    assert sub.threshold == tau and all(e["weight"] > tau for e in sub.edges)
    assert {(e["source"], e["target"], e["head"]) for e in sub.edges} <= {
        (e["source"], e["target"], e["head"]) for e in graph.edges
    }
