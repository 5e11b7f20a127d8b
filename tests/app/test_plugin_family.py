"""A family registered at run time (a plain module, no other edit) reaches everything that lists or computes
keys: Session.get, ``normviz export --maps``, the Explore picker and panels, the Learn page, and the stacks
of an encoder–decoder it applies to (toy-mt's ``encoder_<key>``)."""

from __future__ import annotations

import types

import numpy as np
import pytest

import normviz
from normviz.methods import registry
from normviz.methods.base import KeyInfo, Output, per_layer

from ..helpers import tiny
from ..helpers.app import app, heatmaps, no_exception, title

KEY, NAME, TITLE = "head_mean_alpha", "plugin_head_mean", "Plugin: mean α over heads"


@pytest.fixture
def plugin():
    """A user's family: the heads' mean attention weight, from the recorded layers (default stacks)."""
    family = types.ModuleType(NAME)
    family.NAME = NAME
    family.KEYS = (KeyInfo(KEY, TITLE, False, "mean_h α^h_ij, from the records.", short="mean α"),)
    family.REQUIRES, family.NEEDS_MODEL, family.OPT_IN, family.REFERENCES = {}, False, (), ()
    family.check = lambda request, key, options: None
    family.compute = lambda inputs, keys, options: Output(
        per_layer(inputs, NAME, [KEY], lambda ctx: {KEY: ctx.rec.attn.mean(0)})
    )
    registry.register_family(family)
    yield KEY
    registry.unregister_family(NAME)
    assert KEY not in normviz.all_keys()


def test_session_get_and_the_key_space(plugin, tiny_model):
    lm = tiny_model("bert")
    assert plugin in normviz.all_keys() and plugin in normviz.all_keys(lm)
    a = normviz.Session.from_encoded(lm, [tiny.encoded(n=7)])[0].get([plugin, "attention"])
    np.testing.assert_allclose(a[plugin], a["attention"].mean(1), rtol=1e-12)
    assert normviz.key_info(plugin).group == "alternatives" and normviz.key_info(plugin).stacks == ("model", "encoder")


def test_an_encoder_decoders_encoder_offers_it(plugin):
    lm = normviz.load("toy-mt", dtype="float64")
    keys = normviz.all_keys(lm)
    assert "encoder_" + plugin in keys and "decoder_" + plugin not in keys and plugin not in keys
    s = normviz.Session(lm, "the cat sees a dog", target="mao vidas un inu")
    a = s.get(["encoder_" + plugin, "encoder_attention"])
    np.testing.assert_allclose(a["encoder_" + plugin], a["encoder_attention"].mean(1), rtol=1e-12)
    assert s.refusal("decoder_" + plugin) and s.get([plugin, "cross_norm"], strict=False).refused.keys() == {plugin}


def test_export_maps(plugin, tiny_bert_dir, tmp_path):
    from normviz.cli import main

    out = tmp_path / "m.npz"
    assert (
        main(
            [
                "export",
                "--model",
                str(tiny_bert_dir),
                "--text",
                "a cat",
                "--out",
                str(out),
                "--maps",
                plugin,
                "attention",
                "--dtype",
                "float64",
            ]
        )
        == 0
    )
    data = np.load(out)
    np.testing.assert_allclose(data[plugin], data["attention"].mean(1), rtol=1e-12)


def test_explore_picker_and_panel(plugin):
    at = app(query={"maps": f"attention,{plugin}"})
    at.run()
    no_exception(at)
    assert "mean α" in at.pills(key="w_maps_alt").options  # its short label, in its group's row of pills
    assert [title(f).split(" · ")[0] for f in heatmaps(at)] == ["Attention weights α", TITLE]


def test_learn_page_has_its_tab(plugin):
    at = app("app_pages/2_Learn.py")
    at.run()
    no_exception(at)
    assert TITLE in [t.label for t in at.tabs]
