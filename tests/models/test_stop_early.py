"""A recording pass stopped after the last layer's attention block when every family asked for reads only the
attention blocks (``RECORD = "attention"``: the attention weights and the norm family): the last layer's FF
block does not run, the maps are the full pass's bit for bit, and anything that needs the rest records again,
fully, with the same numbers."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.methods import registry

from ..helpers import tiny

KEYS = ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"]


def _ff_key(lm) -> str:
    return "ff_res" if lm.spec.placement == "pre" else "ff_res_ln"


def _last_layer_calls(lm):
    calls = []
    handle = lm.layers[-1].register_forward_hook(lambda *a: calls.append(1))
    return calls, handle


@pytest.fixture(autouse=True)
def _kernels_loaded(tiny_model):
    # the first use of the compiled kernels changes the bits of later forward passes in this process (~1e-16,
    # the model's own pass too): every comparison here runs after it
    normviz.Session.from_encoded(tiny_model("bert"), [tiny.encoded(n=5)])[0].get(["norm"])


@pytest.mark.parametrize("arch", tiny.ARCHS)
def test_stopped_pass_gives_the_full_pass_maps(arch, tiny_model):
    lm = tiny_model(arch)
    enc = tiny.encoded(n=11, seed=2)
    calls, handle = _last_layer_calls(lm)
    try:
        early = normviz.Session.from_encoded(lm, [enc])[0]
        a = early.get(KEYS)
        assert early.forward_passes == 1 and calls == []  # the last layer never returned: its FF did not run
        last = early.layers(full=False)[-1].rec  # (full=True would record again)
        assert last.out is None and last.final is None and last.z_attn is not None and early.forward_passes == 1
        full = normviz.Session.from_encoded(lm, [enc], options={"stop_early": False})[0]
        b = full.get(KEYS)
        assert calls == [1] and full.layers()[-1].rec.out is not None
    finally:
        handle.remove()
    for k in KEYS:
        assert np.array_equal(a.arrays[k], b.arrays[k]), (arch, k)
    # a family that needs the rest: the session records again, fully, and agrees with the full session
    ff = _ff_key(lm)
    assert getattr(registry.family_of(ff), "RECORD", "full") == "full"
    c, d = early.get([ff]), full.get([ff])
    assert early.forward_passes == 2 and full.forward_passes == 1
    assert np.array_equal(c.arrays[ff], d.arrays[ff])
    assert early.layers()[-1].rec.out is not None
    for k in KEYS:  # computed before the second pass, kept
        assert np.array_equal(early.get([k]).arrays[k], b.arrays[k])
    assert early.forward_passes == 2


def test_one_get_with_a_full_family_runs_one_full_pass(tiny_model):
    lm = tiny_model("bert")
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=9)])[0]
    s.get(KEYS + [_ff_key(lm)])
    assert s.forward_passes == 1 and s.layers()[-1].rec.out is not None


def test_records_after_a_stopped_pass_are_full(tiny_model):
    """The pass's own records (what predictions and explanations read) are always the full pass's."""
    lm = tiny_model("llama")
    enc = tiny.encoded(n=8, seed=4)
    s = normviz.Session.from_encoded(lm, [enc])[0]
    s.get(["norm"])
    assert s.forward_passes == 1
    recs = s.records()
    assert s.forward_passes == 2 and recs[-1].final is not None and recs[-1].out is not None
    ref = normviz.Session.from_encoded(lm, [enc], options={"stop_early": False})[0].records()
    assert all(np.array_equal(r.out.numpy(), q.out.numpy()) for r, q in zip(recs, ref))
    assert np.array_equal(recs[-1].final.numpy(), ref[-1].final.numpy())


@pytest.mark.parametrize("mode", ["qk", "weights"])
def test_batches_and_long_input_records_stop_too(tiny_model, mode):
    lm = tiny_model("bert")
    encs = [tiny.encoded(n=9, seed=1), tiny.encoded(n=6, seed=3)]  # padded: the shorter one is cut
    opts = {"record_attention": mode}
    early = [s.get(KEYS) for s in normviz.Session.from_encoded(lm, encs, options=opts)]
    full = [s.get(KEYS) for s in normviz.Session.from_encoded(lm, encs, options={**opts, "stop_early": False})]
    for a, b in zip(early, full):
        for k in KEYS:
            assert np.array_equal(a.arrays[k], b.arrays[k]), (mode, k)


def test_a_batch_records_again_once(tiny_model):
    """Sessions of one batch share the recording: the first that needs the rest records again for all."""
    lm = tiny_model("gpt2")
    encs = [tiny.encoded(n=9, seed=1), tiny.encoded(n=6, seed=3)]
    sessions = normviz.Session.from_encoded(lm, encs)
    for s in sessions:
        s.get(["norm"])
    ff = _ff_key(lm)
    got = [s.get([ff]).arrays[ff] for s in sessions]
    assert all(s.forward_passes == 2 for s in sessions)
    ref = [s.get([ff]).arrays[ff] for s in normviz.Session.from_encoded(lm, encs, options={"stop_early": False})]
    assert all(np.array_equal(a, b) for a, b in zip(got, ref))
