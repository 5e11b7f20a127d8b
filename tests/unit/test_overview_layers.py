"""The Overview page's numbers one layer at a time (issue 29: it made whole [L, H, n, n] arrays whatever the
length, 6.8 GB at 900 tokens to draw 27): ui.overview_maps gives exactly the crop of the whole arrays and the
per-head shares of the whole arrays, and computes no whole array of a per-layer family."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.ui.kit import data
from normviz.ui.views import overview_maps

from ..helpers import tiny

KEYS = ["attention", "norm", "norm_layer", "attn_res"]
# a cross-layer map (rollouts) comes whole through Session.get, with the per-layer maps it is made from
KEYS_OF = {5: KEYS + ["rollout_attn_res"], 9: ["norm_layer", "attention"]}


@pytest.mark.parametrize("arch", ["bert", "gpt2", "llama"])
@pytest.mark.parametrize("m", [5, 9])
def test_layer_by_layer_equals_the_whole_arrays(tiny_model, arch, m):
    lm = tiny_model(arch)
    enc = tiny.encoded(n=9, seed=4)
    session = normviz.Session.from_encoded(lm, [enc])[0]
    sink = np.zeros(9, bool)
    sink[[0, 8]] = True  # as a [CLS] … [SEP] pair would be
    keys = KEYS_OF[m]
    stacks, shares, refused = overview_maps.compute(session, keys, m, ["attention", "norm"], sink)
    assert not refused
    if "rollout_attn_res" not in KEYS_OF[m]:
        assert session.computed() == []  # no whole array of a per-layer family
    whole = normviz.Session.from_encoded(lm, [enc])[0].get(keys + ["attention", "norm"])
    for k in keys:
        want = data.per_head_stack(whole, k)[:, :, :m, :m]
        assert stacks[k].shape == want.shape and np.array_equal(stacks[k], want), k
    for k in ("attention", "norm"):
        assert np.array_equal(shares[k], data.special_share(whole[k], sink)), k


def test_the_sink_is_the_special_tokens_else_a_decoders_first_token(tiny_model):
    session = normviz.Session.from_encoded(tiny_model("gpt2"), [tiny.encoded(n=6, seed=1)])[0]
    sink, name = overview_maps.sink_of(session, causal=True)
    assert sink.tolist() == [True] + [False] * 5 and "attention sink" in name
    sink, name = overview_maps.sink_of(session, causal=False)
    assert not sink.any() and name is None


def test_grid_tokens_and_layer_bytes_are_known_before_computing(tiny_model):
    lm = tiny_model("bert")
    session = normviz.Session.from_encoded(lm, [tiny.encoded(n=9, seed=4)])[0]
    L, H = lm.n_layers, lm.n_heads
    assert overview_maps.grid_tokens(session, ["norm"], limit_cells=L * H * 16) == 4
    assert overview_maps.grid_tokens(session, ["norm_layer"], limit_cells=L * 16) == 4
    assert overview_maps.layer_bytes(session, ["norm", "norm_layer"]) == (H + 1) * 81 * session.itemsize
    assert session.part.passes == 0  # nothing recorded for either
