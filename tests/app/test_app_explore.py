"""AppTest runs of the Explore page (app.py runs it as the default page) on the embedded minilm."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.core.errors import UnsupportedModelError
from normviz.methods import registry
from normviz.ui.kit import data, st_parts

from ..helpers.app import app, arr, figures, heatmaps, no_exception, texts, title, z
from ..helpers.maps import count_forward

TEXT = "The cat sat on the mat because it was tired."
N = 13  # [CLS] the cat sat on the mat because it was tired . [SEP]


def cached_minilm():
    """The app's own model object (AppTest runs in-process, so hooks on it count the app's passes)."""
    return st_parts.model_cache().get_or_compute("minilm", lambda: normviz.load("minilm"))


@pytest.fixture
def computes(monkeypatch):
    """Calls of every registered family's compute, as (family, keys)."""
    calls = []
    for name, family in registry.families().items():

        def compute(inputs, keys, options, _real=family.compute, _name=name):
            calls.append((_name, tuple(keys)))
            return _real(inputs, keys, options)

        monkeypatch.setattr(family.module, "compute", compute)
    return calls


def test_default_view_renders_four_heatmaps(at):
    hms = heatmaps(at)
    assert len(hms) == 4
    assert [title(f).split(" · ")[0] for f in hms] == [  # the fast default set (issue 13): no FF maps
        "Attention weights α",
        "Norm ‖α f(x)‖",
        "Attention + residual",
        "Attention + residual + norm",
    ]
    for f in hms:
        assert z(f).shape == (N, N)
        assert f["layout"]["yaxis"]["ticktext"][:3] == ["[CLS]", "the", "cat"]
        assert f["data"][0]["showscale"] is True
    # shared colour scales by default: α and ‖αf‖ (per head) on one, the two residual maps on another (issue 23)
    scales = [(f["data"][0]["zmin"], f["data"][0]["zmax"]) for f in hms]
    assert scales[0] == scales[1] and scales[2] == scales[3] and scales[0] != scales[2]
    assert any(c.value == data.SCALE_NOTE for c in at.caption)
    # the callout under the α | ‖αf‖ pair names their largest difference, computed from the panels shown
    labels = hms[0]["layout"]["yaxis"]["ticktext"]
    pa, pb = (data.Panel(k, "", z(f), labels, labels, list(range(N))) for k, f in zip(("attention", "norm"), hms))
    want = data.callout_text(data.largest_difference(pa, pb))
    assert want in texts(at.caption) and "Largest difference: α gives" in want
    assert not at.error
    assert any("device" in c.value and "cpu" in c.value for c in at.sidebar.caption)


def test_layer_and_head_change_the_data_without_recomputing(at, computes):
    before = [z(f) for f in heatmaps(at)]
    lm = cached_minilm()
    forward = count_forward(lm.model)
    calls = forward.__enter__()
    at.slider(key="w_layer").set_value(3).run()
    no_exception(at)
    after = heatmaps(at)
    assert "layer 3" in title(after[0])
    assert not np.allclose(before[0], z(after[0])) and not np.allclose(before[3], z(after[3]))
    at.selectbox(key="w_head").set_value(5).run()
    head5 = heatmaps(at)
    assert "head 5" in title(head5[0]) and not np.allclose(z(after[0]), z(head5[0]))
    assert np.allclose(z(after[3]), z(head5[3]))  # a layer-level map ignores the head
    forward.__exit__(None, None, None)
    assert calls[0] == 0 and computes == []  # slicing, not recomputing
    assert at.query_params["layer"] == "3" and at.query_params["head"] == "5"


def test_toggles_change_the_figures(at):
    at.pills(key="w_maps").set_value(["attention", "norm", "ff"]).run()
    hms = heatmaps(at)
    assert len(hms) == 3 and title(hms[2]).startswith("Feed-forward ·")
    shared = [(f["data"][0]["zmin"], f["data"][0]["zmax"]) for f in hms]
    at.toggle(key="w_shared").set_value(False).run()
    own = [(f["data"][0]["zmin"], f["data"][0]["zmax"]) for f in heatmaps(at)]
    # shared: the per-head maps α and ‖αf‖ on one scale, the whole-layer FF map on its own (issue 23)
    assert shared[0] == shared[1] != shared[2] and own[0] != own[1] and own[2] == shared[2]
    at.toggle(key="w_hide").set_value(True).run()
    hidden = heatmaps(at)
    assert z(hidden[0]).shape == (N - 2, N - 2)
    assert "[CLS]" not in hidden[0]["layout"]["xaxis"]["ticktext"]
    assert np.allclose(z(hidden[0]).sum(1), 1)
    assert any("renormalised" in m for m in texts(at.info))
    at.radio(key="w_values").set_value("raw").run()
    raw = heatmaps(at)
    assert not np.allclose(z(raw[1]).sum(1), 1)  # feed-forward norms in their own units


def test_focus_token_shows_its_row_as_bars(at):
    at.pills(key="w_focus").set_value(2).run()  # the row of token buttons above the panels
    no_exception(at)
    bars = [f for f in figures(at) if f["data"][0]["type"] == "bar" and title(f).startswith("Row of")]
    assert len(bars) == 1 and len(bars[0]["data"]) == 4
    hm = heatmaps(at)
    assert np.allclose(arr(bars[0]["data"][0]["y"]), z(hm[0])[2])  # the "cat" row of the first panel
    assert at.query_params["focus"] == "2"


def test_downloads_offer_csv_and_npz(at):
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download CSV", "Download NPZ", "Download HTML"]


def test_url_query_restores_a_view():
    at = app(
        query={
            "text": "Dogs bark loudly.",
            "layer": "4",
            "head": "7",
            "maps": "norm,attn_res",
            "hide_special": "1",
            "shared_scale": "0",
        }
    )
    at.run()
    no_exception(at)
    assert at.text_input(key="w_text").value == "Dogs bark loudly."
    assert at.slider(key="w_layer").value == 4 and at.selectbox(key="w_head").value == 7
    assert at.toggle(key="w_hide").value is True and at.toggle(key="w_shared").value is False
    hms = heatmaps(at)
    assert [title(f) for f in hms] == ["Norm ‖α f(x)‖ · layer 4, head 7", "Attention + residual · layer 4"]
    assert hms[0]["layout"]["xaxis"]["ticktext"] == ["dogs", "bark", "loudly", "."]


def test_a_bad_link_value_is_reported_not_fatal():
    at = app(query={"layer": "deep", "maps": "attention,nosuchmap"})
    at.run()
    no_exception(at)
    warnings = " ".join(texts(at.warning))
    assert "layer='deep'" in warnings and "nosuchmap" in warnings
    assert len(heatmaps(at)) == 1


def test_empty_text_says_so(at):
    at.text_input(key="w_text").set_value("   ").run()
    no_exception(at)
    assert any("text is empty" in e for e in texts(at.error))
    assert at.slider(key="w_layer") is not None  # the rest of the page keeps working
    at.text_input(key="w_text").set_value("Birds sing.").run()
    assert len(heatmaps(at)) == 4 and not at.error


@pytest.mark.parametrize(
    "model,expected",
    [
        ("no such model!", "Unknown model"),
        ("some-org/surely-missing-model", "Could not fetch"),
    ],
)
def test_bad_models_say_what_to_do(model, expected):
    at = app(query={"model": model})
    at.run()
    no_exception(at)
    assert any(expected in e for e in texts(at.error)), texts(at.error)
    assert at.text_input(key="w_text").value  # the page is still there
    at.sidebar.selectbox(key="w_model_choice").set_value("minilm").run()
    assert len(heatmaps(at)) == 4 and not at.error


def test_a_model_without_an_architecture_row_gets_raw_attention_and_one_note(tmp_path):
    """The raw-attention floor in the app (normviz.models.floor): a bloom directory loads, Explore draws α, and
    the page says once what the model gets and what needs a row, with no error box per refused map."""
    import torch
    import transformers

    from tools.tiny import randomize_weights, tokenizer

    torch.manual_seed(0)
    cfg = transformers.BloomConfig(vocab_size=97, hidden_size=32, n_layer=2, n_head=4)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    randomize_weights(model)
    model.save_pretrained(tmp_path)
    tokenizer().save_pretrained(tmp_path)
    at = app(query={"model": str(tmp_path), "text": "the cat sat on the mat"})
    at.run()
    no_exception(at)
    notes = [t for t in texts(at.info) if "has no architecture row" in t]
    assert len(notes) == 1 and "'bloom' model" in notes[0] and "register_architecture('bloom'" in notes[0]
    assert not at.error and not [w for w in texts(at.warning) if "Not available" in w]
    assert [title(f).split(" · ")[0] for f in heatmaps(at)] == ["Attention weights α"]
    assert any("no architecture row" in c.value for c in at.sidebar.caption)
    lm = st_parts.model_cache().get_or_compute(str(tmp_path), lambda: None)
    a = normviz.Session(lm, "the cat sat on the mat").get(["attention"])
    want = a.arrays["attention"][0].mean(0)
    np.testing.assert_allclose(np.nan_to_num(z(heatmaps(at)[0])), want, rtol=1e-5, atol=1e-6)  # NaN: j > i
    why = app("app_pages/0_Why.py", query={"model": str(tmp_path), "text": "the cat sat on the mat"})
    why.run()  # the Why page: the model's candidates and its logit lens, and the one note (explain needs a row)
    no_exception(why)
    assert not why.error and len([t for t in texts(why.info) if "has no architecture row" in t]) == 1
    assert [title(f) for f in figures(why)][1] == "Logit lens: the probability after every layer"
    with pytest.raises(UnsupportedModelError, match="'pegasus' encoder–decoder"):  # no floor for these
        transformers.PegasusConfig(
            vocab_size=50,
            d_model=16,
            encoder_layers=1,
            decoder_layers=1,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            encoder_ffn_dim=16,
            decoder_ffn_dim=16,
        ).save_pretrained(tmp_path / "p")
        normviz.load(str(tmp_path / "p"))


def test_too_long_text_is_cut_with_a_message(monkeypatch):
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "8")
    at = app(query={"text": TEXT})
    at.run()
    no_exception(at)
    assert any("limit of 8" in w for w in texts(at.warning)), texts(at.warning)
    assert z(heatmaps(at)[0]).shape == (8, 8)


def test_allowlist_restricts_the_model_field(monkeypatch):
    monkeypatch.setenv("NORMVIZ_ALLOWED_MODELS", "minilm")
    at = app(query={"model": "gpt2"})
    at.run()
    no_exception(at)
    assert any("not available on this deployment" in e for e in texts(at.error))
    assert at.sidebar.selectbox(key="w_model_choice").options == ["minilm"]
    assert not [t for t in at.sidebar.text_input if t.key == "w_model_other"]
    assert len(heatmaps(at)) == 4  # falls back to an allowed model


@pytest.fixture
def costly_method():
    """A user's own family (a plain module) whose check refuses every input as too costly."""
    import types

    from normviz.core.errors import TooCostlyError
    from normviz.methods.base import KeyInfo

    key, name = "test_costly", "test_costly_family"
    family = types.ModuleType(name)
    family.NAME = name
    family.KEYS = (KeyInfo(key, "Costly test map", False, "raises TooCostlyError"),)
    family.REQUIRES = {}
    family.NEEDS_MODEL = False
    family.OPT_IN = (key,)
    family.REFERENCES = ()

    def check(request, key, options):
        raise TooCostlyError(
            f"Attention flow is too costly for {request.n_tokens} tokens here; try a text under 10 tokens."
        )

    def compute(inputs, keys, options):
        raise AssertionError("a refused key is never computed")

    family.check, family.compute = check, compute
    registry.register_family(family)
    yield key
    registry._FAMILIES.pop(name, None)
    registry._KEYS.pop(key, None)


def test_a_too_costly_map_says_so_and_the_rest_still_shows(costly_method):
    at = app(query={"maps": f"attention,{costly_method},norm"})
    at.run()
    no_exception(at)
    assert any("too costly for 13 tokens" in e for e in texts(at.error)), texts(at.error)
    assert len(heatmaps(at)) == 2


def test_presentation_mode_enlarges_fonts(at):
    small = heatmaps(at)[0]["layout"]["font"]["size"]
    at.sidebar.toggle(key="w_present").set_value(True).run()
    assert heatmaps(at)[0]["layout"]["font"]["size"] > small
    assert at.query_params["present"] == "1"


def test_feed_forward_maps_too_costly_for_the_cpu_budget_say_so(monkeypatch):
    monkeypatch.setenv("NORMVIZ_FF_BUDGET", "0.1")  # the smallest budget the setting accepts
    text = "A sentence long enough for this budget, with many words, " * 3
    at = app(query={"text": text, "maps": "attention,ff_res"})
    at.run()
    no_exception(at)
    assert any("feed-forward maps" in e and "NORMVIZ_FF_BUDGET" in e for e in texts(at.error)), texts(at.error)
    assert len(heatmaps(at)) == 1  # attention still shows
    monkeypatch.delenv("NORMVIZ_FF_BUDGET")
    at.run()
    assert len(heatmaps(at)) == 2 and not at.error


def test_adding_a_map_computes_its_method_once(computes):
    at = app(query={"text": "Only once, please.", "maps": "attention"})
    at.run()
    no_exception(at)
    lm = cached_minilm()
    assert [c[0] for c in computes] == ["weights"]
    with count_forward(lm.model) as calls:
        at.pills(key="w_maps").set_value(["attention", "ff"]).run()
        assert [c[0] for c in computes] == ["weights", "feedforward"]  # the FF block, once
        at.pills(key="w_maps").set_value(["attention", "ff", "ff_res"]).run()
        at.slider(key="w_layer").set_value(2).run()
    assert [c[0] for c in computes] == ["weights", "feedforward"] and len(heatmaps(at)) == 3
    assert calls[0] == 0  # the text's records are kept: no second forward pass


def test_the_default_view_runs_the_forward_pass_once_and_a_layer_change_none():
    st_parts.session_cache().clear()  # the session cache is shared by every AppTest run in this process
    lm = cached_minilm()
    with count_forward(lm.model) as calls:
        at = app()
        at.run()
        no_exception(at)
        assert len(heatmaps(at)) == 4
        assert calls[0] == 1
        at.slider(key="w_layer").set_value(4).run()
        at.selectbox(key="w_head").set_value(2).run()
        no_exception(at)
        assert "layer 4" in title(heatmaps(at)[0])
        at.pills(key="w_maps").set_value(
            ["attention", "norm", "attn_res_ln", "ff_res_ln", "norm_layer", "rollout_attention"]
        ).run()
        assert len(heatmaps(at)) == 6
    assert calls[0] == 1


def test_switching_to_the_llama_model_keeps_the_view_working(at):
    at.slider(key="w_layer").set_value(5).run()
    at.sidebar.selectbox(key="w_model_choice").set_value("smollm2").run()
    no_exception(at)
    assert not at.error and not at.warning
    hms = heatmaps(at)
    assert [title(f).split(" · ")[0] for f in hms] == [
        "Attention weights α",
        "Norm ‖α f(x)‖",
        "Attention + residual",
        "Attention + residual + norm",
    ]
    assert hms[0]["layout"]["yaxis"]["ticktext"][:2] == ["The", " cat"] and z(hms[0]).shape == (11, 11)
    assert "layer 5" in title(hms[0])
    at.slider(key="w_layer").set_value(29).run()  # 30 layers now
    assert "layer 29" in title(heatmaps(at)[0])
    assert any("smollm2" in c.value and "30 layers × 9 heads" in c.value for c in at.sidebar.caption)
    assert at.query_params["model"] == "smollm2"


def test_an_example_sentence_pair_fills_both_fields(at):
    from normviz.ui.kit.st_parts import OTHER  # noqa: F401  (the free-field choice exists)

    i = next(i for i, opt in enumerate(at.selectbox(key="w_example").options) if "‖" in opt)
    at.selectbox(key="w_example").set_value(i).run()
    no_exception(at)
    assert at.text_input(key="w_pair").value
    ticks = heatmaps(at)[0]["layout"]["xaxis"]["ticktext"]
    assert ticks.count("[SEP]") + ticks.count("[SEP]·2") == 2  # two segments
    assert at.query_params["pair"] == at.text_input(key="w_pair").value


def test_the_free_model_field_reports_a_bad_name(at):
    at.sidebar.selectbox(key="w_model_choice").set_value(st_parts.OTHER).run()
    assert any("Type a Hub id" in i for i in texts(at.sidebar.info))
    at.sidebar.text_input(key="w_model_other").set_value("definitely not/a model").run()
    no_exception(at)
    assert any("Unknown model" in e for e in texts(at.error))
