"""Everything the rest of the code knows about a key is on its KeyInfo (filled from its family), and the
helpers that read it: the picker group, the short label, the unit, the stacks, the budget option (one rule,
older names as aliases), the one pair-boundary rule, and family names = module names (older names kept)."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz import methods
from normviz.core.analysis import pair_boundary
from normviz.core.errors import TooCostlyError, UnknownKeyError, UnknownMethodError
from normviz.methods import keyspace


def test_every_key_is_described_by_its_family():
    for name, family in methods.families().items():
        assert family.module.__name__.rsplit(".", 1)[-1] == name  # family name = module name
        for info in family.keys:
            assert info.group in methods.GROUPS and info.unit and info.stacks and len(info.label) <= 22, info
            assert methods.budget_option(info.key) == (f"{name}_budget_s" if family.budget is not None else None)


def test_groups_units_and_labels():
    assert [keyspace.key_info(k).group for k in ("norm", "ff_res_ln", "rollout_alti", "globenc", "alti")] == [
        "per layer",
        "per layer",
        "across layers",
        "across layers",
        "alternatives",
    ]
    assert keyspace.unit("attention") == keyspace.unit("encoder_attention") == "weight α"
    assert keyspace.unit("rollout_attn_res") == "score<br>(rows sum to ~1)"
    assert keyspace.unit("norm", br=" ") == "‖vector‖ (hidden-state units)"
    assert keyspace.unit("globenc_layer") == keyspace.unit("norm") != keyspace.unit("globenc")
    assert keyspace.unit("norm", "share") == "share of the row"
    assert methods.key_info("norm_layer").label == "‖Σαf‖ heads summed"
    assert keyspace.key_info("decoder_norm").title.startswith("Decoder: ")


def test_budget_options_one_rule_and_their_aliases():
    from normviz.methods import feedforward, interactions

    assert methods.budget_option("ff_res") == "feedforward_budget_s"
    assert methods.budget_option("rollout_alti") == methods.budget_option("alti") == "interactions_budget_s"
    assert set(methods.budget_options()) == {
        "feedforward_budget_s",
        "zeroing_budget_s",
        "interactions_budget_s",
        "effective_budget_s",
        "globenc_budget_s",
        "decompx_budget_s",
        "knockout_budget_s",
        "head_ablation_budget_s",
    }  # + keyless families
    req = keyspace.Request(
        n_tokens=200,
        n_layers=12,
        n_heads=12,
        d_model=768,
        d_ff=3072,
        placement="post",
        causal=False,
        gated=False,
        device="cpu",
    )
    for option in ("feedforward_budget_s", "ff_budget_s"):  # the new name and the older one both limit
        with pytest.raises(TooCostlyError, match="feedforward_budget_s"):
            feedforward.check(req, "ff_res", {option: 1e-9})
    for option in ("interactions_budget_s", "alti_budget_s"):
        with pytest.raises(TooCostlyError, match="alti_budget_s"):
            interactions.check(req, "alti", {option: 1e-9})
    feedforward.check(req, "ff_res", {})  # no budget: no limit


def test_pair_boundary_one_rule():
    class A:
        text_pair = "b"
        special = np.array([1, 0, 0, 1, 0, 0, 1], bool)  # BERT: [CLS] a a [SEP] b b [SEP]

    assert pair_boundary(A) == 4
    A.special = np.array([1, 0, 0, 1, 1, 0, 0, 1], bool)  # RoBERTa: <s> a a </s></s> b b </s>
    assert pair_boundary(A) == 5
    A.special = np.array([0, 0, 1, 0, 0], bool)  # a decoder's pair: a a <sep> b b (no leading special)
    assert pair_boundary(A) == 3
    A.special = np.array([1, 0, 0, 1], bool)  # nothing after the separator
    assert pair_boundary(A) is None
    A.text_pair = None
    assert pair_boundary(A) is None
    from normviz.ui.kit.data import pair_boundary as ui
    from normviz.viz.notebook import pair_boundary as nb

    assert nb is ui is pair_boundary  # one function


def test_family_names_and_their_older_aliases(tiny_model):
    lm = tiny_model("bert")
    assert keyspace.resolve(lm, ["decomposition"]) == keyspace.resolve(lm, ["decompx"]) == ["decompx"]
    assert keyspace.resolve(lm, ["global_encoder"]) == keyspace.resolve(lm, ["globenc"]) == ["globenc_layer", "globenc"]
    assert methods.family("global_encoder") is methods.family("globenc")
    assert UnknownMethodError is UnknownKeyError
    with pytest.raises(UnknownKeyError, match="Unknown map key 'nope'"):
        keyspace.resolve(lm, ["nope"])


def test_all_keys_without_and_with_a_model(tiny_model):
    assert normviz.all_keys() == methods.all_keys() and "cross_norm" not in normviz.all_keys()
    assert normviz.all_keys("pre") == methods.all_keys("pre")
    lm = tiny_model("bert")
    assert normviz.all_keys(lm) == [k for k in methods.all_keys(lm.spec.placement)]


def test_a_key_that_does_not_apply_is_not_an_unknown_key():
    """NotApplicableError (a real key, refused for this model) and UnknownKeyError (no such key) are siblings:
    ``except UnknownKeyError`` does not swallow a refusal, both are NormvizErrors."""
    from normviz.core.errors import NormvizError, NotApplicableError

    assert not issubclass(NotApplicableError, UnknownKeyError) and issubclass(NotApplicableError, NormvizError)


def test_a_key_is_parsed_once(tiny_model):
    """``resolve`` returns :class:`Key` values: strings (dict keys, file names) that know their stack and name, so
    the schedule reads them instead of parsing again; a Key survives pickling (the worker process) and JSON."""
    import json
    import pickle

    from normviz.methods.keyspace import Key

    lm = tiny_model("bert")
    keys = keyspace.resolve(lm, ["norm", "rollout_attention"])
    assert all(type(k) is Key for k in keys) and keys == ["norm", "attention", "rollout_attention"]
    k = Key("encoder_norm")
    assert (k.stack, k.name, k) == ("encoder", "norm", "encoder_norm") and keyspace.parse(k) == ("encoder", "norm")
    assert Key("cross_norm").stack == "cross" and Key(k) is k and {k: 1}["encoder_norm"] == 1
    back = pickle.loads(pickle.dumps(k))
    assert type(back) is Key and (back.stack, back.name) == ("encoder", "norm")
    assert json.loads(json.dumps({k: [k]})) == {"encoder_norm": ["encoder_norm"]}
    with pytest.raises(UnknownKeyError):
        Key("no_such_map")
