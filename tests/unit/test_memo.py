"""Per-rerun work kept beside what it derives from (normviz.ui.kit.memo): computed once per owner and key,
read-only, gone with the owner; the memoised panels and frames equal the ones computed afresh."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from normviz.ui.kit import data, frames
from normviz.ui.kit.memo import memoised, stats


def test_computed_once_read_only_and_gone_with_the_owner():
    owner = np.zeros(3)
    calls = []
    first = memoised(owner, "k", lambda: calls.append(1) or np.arange(4.0))
    again = memoised(owner, "k", lambda: calls.append(1) or np.arange(4.0))
    assert again is first and calls == [1]
    with pytest.raises(ValueError):
        first[0] = 1.0  # read-only: a caller cannot change another visitor's view
    before = stats()["owners"]
    del owner, first, again
    gc.collect()
    assert stats()["owners"] == before - 1


def test_an_owner_holds_at_most_max_bytes(monkeypatch):
    """Results past the byte bound push the oldest out; one bigger than the bound is returned, not kept."""
    from normviz.ui.kit import memo

    monkeypatch.setattr(memo, "MAX_BYTES", 10_000)
    owner = np.zeros(1)
    for k in range(5):  # 4,000 bytes each: at most two fit
        memoised(owner, k, lambda: np.zeros(500))
    table = memo._MEMO[id(owner)][1]
    assert sorted(table.keys()) == [3, 4] and sum(memo.size_of(v) for _, v in table.items()) <= 10_000
    assert table.nbytes == 8_000  # the running count equals what is held
    calls = []
    big = lambda: calls.append(1) or np.zeros(2_000)  # 16,000 bytes
    memoised(owner, "big", big)
    memoised(owner, "big", big)
    assert calls == [1, 1] and "big" not in table and sorted(table.keys()) == [3, 4]


class _Analysis:
    """The parts of normviz.Analysis that build_panels and panel_frames read."""

    def __init__(self, rng):
        self.labels = ["[CLS]", "the", "cat", "sat", "[SEP]"]
        self.special = np.array([1, 0, 0, 0, 1], bool)
        self.arrays = {
            "norm": rng.random((3, 2, 5, 5)),
            "attn_res": rng.random((3, 5, 5)),
            "attention": rng.random((3, 2, 5, 5)),
        }

    def __contains__(self, key):
        return key in self.arrays

    def map(self, key, layer, head=None):
        arr = self.arrays[key]
        return arr[layer] if arr.ndim == 3 else (arr[layer].mean(0) if head is None else arr[layer, head])


def test_memoised_panels_and_frames_equal_fresh_ones():
    a = _Analysis(np.random.default_rng(0))
    keys = ["norm", "attn_res"]
    for layer, head, hide, values in [(0, None, True, "share"), (2, 1, False, "raw"), (2, 1, False, "raw")]:
        got = data.build_panels(a, keys, layer, head, hide, values)
        for p in got:
            want, keep = data.shown_matrix(a.map(p.key, layer, head), a.special, hide, values)
            np.testing.assert_array_equal(p.matrix, want)
            assert p.index == keep
    wanted = [(0, None), (1, None), (2, 0), (2, 1)]
    f1 = frames.panel_frames(
        a, keys, wanted, hide_special=True, values="share", shared_scale=True, threshold=0.1, causal=False
    )
    f2 = frames.panel_frames(
        a, keys, wanted[::-1], hide_special=True, values="share", shared_scale=True, threshold=0.1, causal=False
    )
    assert f1 == f2 and set(f1["norm"]) == {"0:-1", "1:-1", "2:0", "2:1"}
    # A drawing option is part of the key. The shared scale spans the per-head maps (and, apart, the whole-layer
    # ones), so it takes two per-head maps to change a frame.
    per_head = ["attention", "norm", "attn_res"]
    shared = frames.panel_frames(
        a, per_head, wanted, hide_special=True, values="share", shared_scale=True, threshold=0.1, causal=False
    )
    other = frames.panel_frames(
        a, per_head, wanted, hide_special=True, values="share", shared_scale=False, threshold=0.1, causal=False
    )
    assert other != shared
