"""attend on Falcon, whose attention runs inline (no attention interface): q and k rerun from the fused projection
by the row's layout and rotary (normviz.record.inline_qk), on tiny random float64 models of each layout
transformers has — the old one (a KV head per query head), multi-query (one KV head), the new decoder architecture
(grouped KV heads, one or two LayerNorms), parallel and sequential blocks. The identity: the parts sum to the score,
which is the model's own up to each row's softmax constant (log α_ij − s_ij the same for every key j), to 1e-10
relative (Falcon's softmax runs in the model's dtype). ALiBi (Falcon-RW) is refused, said why (also
tests/models/test_arch_parts.py, which covers the tiny rows falcon, falcon_mq and falcon_seq)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch
import transformers as tf

import normviz
from normviz.attribution.qk import attend
from normviz.core.errors import NotApplicableError

from ..helpers import tiny

# (config values over tools/tiny.py's falcon_seq, the row's qkv layout, its KV heads)
LAYOUTS = {
    "old_parallel": (dict(parallel_attn=True), "per_head_qkv", 4),
    "old_sequential": (dict(parallel_attn=False), "per_head_qkv", 4),
    "mq_sequential": (dict(multi_query=True, parallel_attn=False, bias=False), "fused_qkv", 1),
    "new_one_ln": (
        dict(new_decoder_architecture=True, num_kv_heads=2, num_ln_in_parallel_attn=1, parallel_attn=True),
        "grouped_qkv",
        2,
    ),
    "new_mq": (dict(new_decoder_architecture=True, num_kv_heads=1, parallel_attn=True), "grouped_qkv", 1),
}


def _build(values: dict, alibi: bool = False):
    config = copy.deepcopy(tiny.config_of("falcon_seq"))
    for k, v in {**values, "alibi": alibi, "tie_word_embeddings": False}.items():
        setattr(config, k, v)
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(config, attn_implementation="eager").to(torch.float64).eval()
    tiny.randomize_weights(model)
    return normviz.from_model(model, None, name="tiny-falcon-layout")


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_attend_sums_to_the_models_own_score_up_to_the_row_constant(layout):
    values, qkv_layout, kv_heads = LAYOUTS[layout]
    lm = _build(values)
    assert (lm.spec.qkv_layout, lm.layer_params(0).n_kv_heads) == (qkv_layout, kv_heads)
    enc = tiny.encoded(n=9, seed=2)
    s = normviz.Session.from_encoded(lm, [enc])[0]
    with torch.no_grad():
        own = lm.model(input_ids=torch.tensor([enc.ids]), output_attentions=True).attentions
    i = 7
    for layer in range(lm.n_layers):
        for head in (0, lm.n_heads - 1):
            got = [attend(s, layer, head, query=i, key=j, by_token=j == i) for j in range(i + 1)]
            scores = np.array([a.total for a in got])
            scale = max(1.0, np.abs(scores).max())
            for a in got:
                assert abs(a.by_component.sum() - a.total) <= 1e-10 * scale
                assert abs(a.model_score - a.total) <= 1e-10 * scale
            assert abs(got[-1].by_token_full.sum() - got[-1].total) <= 1e-10 * scale
            shift = np.log(own[layer][0, head, i, : i + 1].numpy()) - scores
            assert np.ptp(shift) <= 1e-10 * scale, (layout, layer, head, np.ptp(shift))
            assert np.ptp(scores) > 1e-3  # the keys' scores differ: the check above could fail


def test_alibi_is_refused_with_the_reason():
    lm = _build(LAYOUTS["old_parallel"][0], alibi=True)
    s = normviz.Session.from_encoded(lm, [tiny.encoded(n=5, seed=2)])[0]
    with pytest.raises(NotApplicableError, match="ALiBi"):
        attend(s, 0, 0, query=3, key=1)
