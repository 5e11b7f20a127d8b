"""α written by the recording pass into one pooled block (:mod:`normviz.record.alpha_into`): the same bits as the
model's own eager α and outputs, on every tiny float64 architecture and on the embedded float32 models; the
``attention`` map is then the block itself (no copy), and where a model's softmax cannot be redirected the
copy path gives the same arrays."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.core.tokens import encode, pad_batch
from normviz.record import alpha_into
from normviz.record.recorder import record

from ..helpers import tiny

KEYS = ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"]
# Llama-family eager softmax runs in float32 (then .to(float64)) in a float64 model: not redirected there
REDIRECTED_F64 = {"bert", "roberta", "electra", "distilbert", "gpt2"}


def _recorded(lm, enc, into: bool, monkeypatch):
    monkeypatch.setattr(alpha_into, "MIN_BYTES", 0 if into else 1 << 60)
    ids, mask = pad_batch([enc])
    return record(lm, ids, mask)[0]


def _same_records(a, b) -> None:
    for ra, rb in zip(a, b):
        for name in ("x", "attn", "z_attn", "z_ff", "out", "v", "final"):
            ta, tb = getattr(ra, name), getattr(rb, name)
            assert (ta is None) == (tb is None), name
            if ta is not None:
                assert torch.equal(ta, tb), name


@pytest.mark.parametrize("arch", tiny.ARCHS)
def test_same_bits_as_the_eager_pass_tiny(arch, tiny_model, monkeypatch):
    lm = tiny_model(arch)
    enc = tiny.encoded(n=11, seed=3)
    plain = _recorded(lm, enc, False, monkeypatch)
    into = _recorded(lm, enc, True, monkeypatch)
    _same_records(into, plain)
    block = alpha_into.block_of([r.attn for r in into])
    assert (block is not None) == (arch in REDIRECTED_F64)
    assert alpha_into.block_of([r.attn for r in plain]) is None  # separate tensors: never taken for a block
    # the model's own pass, without normviz: the same α and last hidden state
    out = lm.model(input_ids=torch.tensor([enc.ids]), output_attentions=True)
    for r, a in zip(into, out.attentions):
        assert torch.equal(r.attn, a[0])
    assert torch.equal(into[-1].final, out.last_hidden_state[0])


@pytest.mark.parametrize("name", ["minilm", "smollm2"])
def test_same_bits_float32_embedded(name, request, monkeypatch):
    lm = request.getfixturevalue(name)
    enc = encode(lm.tokenizer, "The quick brown fox jumps over the lazy dog near the river bank.")
    plain = _recorded(lm, enc, False, monkeypatch)
    into = _recorded(lm, enc, True, monkeypatch)
    _same_records(into, plain)
    assert alpha_into.block_of([r.attn for r in into]) is not None  # float32: redirected in both


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_attention_map_is_the_block_and_equals_the_copy(arch, tiny_model, monkeypatch):
    lm = tiny_model(arch)
    enc = tiny.encoded(n=10, seed=5)
    took = []
    original = alpha_into.block_of

    def spy(alphas):
        got = original(alphas)
        took.append(got is not None)
        return got

    # the first use of the compiled kernels changes the bits of later forward passes of this process (seen
    # with the model's own pass too, ~1e-16 in float64): both paths are compared after it
    normviz.Session.from_encoded(lm, [enc])[0].get(KEYS)
    monkeypatch.setattr(alpha_into, "block_of", spy)
    results = {}
    for into in (True, False):
        monkeypatch.setattr(alpha_into, "MIN_BYTES", 0 if into else 1 << 60)
        results[into] = normviz.Session.from_encoded(lm, [enc])[0].get(KEYS)
    assert took[0] == (arch in REDIRECTED_F64) and not took[1]
    for k in KEYS:
        assert np.array_equal(results[True].arrays[k], results[False].arrays[k]), k


def test_one_layer_map_and_other_threads(tiny_model, monkeypatch):
    """A layer alone (Session.map's path) is its slot; a pass in another thread meanwhile is not redirected."""
    import threading

    lm = tiny_model("bert")
    enc = tiny.encoded(n=10, seed=5)
    recs = _recorded(lm, enc, True, monkeypatch)
    one = alpha_into.block_of([recs[1].attn])
    assert one is not None and one.data_ptr() == recs[1].attn.data_ptr()
    assert alpha_into.block_of([recs[1].attn, recs[0].attn]) is None  # out of order: not one block
    seen = {}
    monkeypatch.setattr(alpha_into, "MIN_BYTES", 1 << 60)  # the other thread's own pass: no block of its own

    def other():
        ids, mask = pad_batch([enc])
        seen["recs"] = record(lm, ids, mask)[0]
        seen["model"] = lm.model(input_ids=ids, output_attentions=True).attentions  # same thread, same bits

    with alpha_into.into([list(layer.modules()) for layer in lm.layers], lm.n_heads, len(enc.ids), lm.dtype) as blk:
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert alpha_into.block_of([r.attn for r in seen["recs"]]) is None
    assert all(r.attn.data_ptr() != blk.block[i].data_ptr() for i, r in enumerate(seen["recs"]))
    assert all(torch.equal(r.attn, a[0]) for r, a in zip(seen["recs"], seen["model"]))


def test_not_for_batches_or_small_inputs():
    assert not alpha_into.wanted(6, 12, 512, 2, torch.float32, torch.device("cpu"))
    assert not alpha_into.wanted(6, 12, 512, 1, torch.float16, torch.device("cpu"))
    assert not alpha_into.wanted(6, 12, 16, 1, torch.float32, torch.device("cpu"))
    assert alpha_into.wanted(6, 12, 128, 1, torch.float32, torch.device("cpu"))
