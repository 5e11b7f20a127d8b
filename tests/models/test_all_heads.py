"""``map(key, layer)`` with all heads is one quantity per call (issue 32): the key its family declares as its
"all heads" view (``norm`` → ``norm_layer``: the heads' vectors summed, then the norm), else the head mean
(``attention``), whatever else the session or the Analysis computed before."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.core.errors import NormvizError
from normviz.methods import keyspace
from tools.tiny import build_seq2seq

from ..helpers.tiny import encoded

SRC, TGT = "the big cat sat on the red mat", "le grand chat assis sur le tapis rouge"


def fresh(lm, options=None):
    return normviz.Session.from_encoded(lm, [encoded(n=9)], options=options)[0]


@pytest.mark.parametrize("arch", ["bert", "llama"])
@pytest.mark.parametrize("options", [{}, {"compute_together": False}])
def test_the_same_call_gives_the_same_array_whatever_was_computed(tiny_model, arch, options):
    lm = tiny_model(arch)
    layer = 1
    truth = fresh(lm, options).get(["norm_layer"])["norm_layer"][layer]
    calls = {
        "get(norm).map": fresh(lm, options).get(["norm"]).map("norm", layer),
        "get(norm, norm_layer).map": fresh(lm, options).get(["norm", "norm_layer"]).map("norm", layer),
        "get(all).map": fresh(lm, options).get(["all"]).map("norm", layer),
        "Session.map alone": fresh(lm, options).map("norm", layer),
    }
    s = fresh(lm, options)
    s.get(["norm"])
    calls["Session.map after get(norm)"] = s.map("norm", layer)
    calls["Session.maps after get(norm)"] = s.maps(["norm", "attention"], layer)["norm"]
    mean = fresh(lm, options).get(["norm"])["norm"][layer].mean(0)
    assert np.abs(truth - mean).max() > 1e-3 * np.abs(truth).max()  # two different quantities: the test can tell
    for name, got in calls.items():
        np.testing.assert_allclose(got, truth, rtol=0, atol=1e-12, err_msg=name)
    # a per-head key without a declared view: the head mean, on every path
    alpha = fresh(lm, options).get(["attention"])["attention"][layer].mean(0)
    np.testing.assert_allclose(fresh(lm, options).get(["attention", "norm"]).map("attention", layer), alpha, atol=1e-12)
    np.testing.assert_allclose(fresh(lm, options).map("attention", layer), alpha, atol=1e-12)


def test_the_rule_is_the_family_records():
    assert keyspace.layer_view("norm") == "norm_layer"
    assert keyspace.layer_view("encoder_norm") == "encoder_norm_layer"
    assert keyspace.layer_view("cross_norm") == "cross_norm_layer"
    assert keyspace.layer_view("attention") is None and keyspace.layer_view("norm_layer") is None


def test_encoder_decoder_stacks_follow_the_same_rule():
    lm = build_seq2seq("marian")
    for key in ("encoder_norm", "decoder_norm", "cross_norm"):
        view = keyspace.layer_view(key)
        truth = normviz.Session(lm, SRC, target=TGT).get([view])[view][0]
        got = normviz.Session(lm, SRC, target=TGT).get([key]).map(key, 0)
        np.testing.assert_allclose(got, truth, atol=1e-12, err_msg=key)


def test_a_view_that_was_not_computed_is_said_not_replaced(tiny_model):
    """An Analysis whose view is missing (refused) says so rather than returning the head mean."""
    a = fresh(tiny_model("bert")).get(["norm"])
    a.views.clear()
    with pytest.raises(NormvizError, match="norm_layer"):
        a.map("norm", 0)
    assert a.map("norm", 0, head=1).shape == (9, 9)
