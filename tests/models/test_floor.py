"""The raw-attention floor (normviz.models.floor): a model type with no architecture row loads, gets α, its
rollout and the logit lens from its own pass, and every other key is refused per key with one note."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import transformers as tf

import normviz
from normviz.cli import main as cli_main
from normviz.core.errors import NotApplicableError, UnsupportedModelError
from normviz.methods.rollouts import attention_with_residual, rollout
from normviz.models import floor
from normviz.models.arch import ARCHITECTURES
from normviz.models.loading import FloorWarning
from tools.tiny import from_ids, randomize_weights, tokenizer

FLOOR_ARCHS = ("bloom", "mpt")
IDS = [5, 9, 14, 3, 22, 7, 30, 11]


def _config(arch: str):
    if arch == "bloom":
        return tf.BloomConfig(vocab_size=97, hidden_size=32, n_layer=3, n_head=4)
    return tf.MptConfig(vocab_size=97, d_model=32, n_layers=3, n_heads=4, max_seq_len=64, expansion_ratio=2)


def raw(arch: str, dtype=torch.float64):
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(_config(arch), attn_implementation="eager").to(dtype).eval()
    randomize_weights(model)
    return model


def floor_lm(arch: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FloorWarning)
        return normviz.from_model(raw(arch), None, name=f"tiny-{arch}")


def _session(lm, ids=IDS):
    return normviz.Session.from_encoded(lm, [from_ids(ids)])[0]


@pytest.mark.parametrize("arch", FLOOR_ARCHS)
def test_no_row_loads_on_the_floor_with_one_note(arch):
    assert arch not in ARCHITECTURES  # else this test should pick another type without a row
    with pytest.warns(FloorWarning) as caught:
        lm = normviz.from_model(raw(arch), None, name=f"tiny-{arch}")
    assert len(caught) == 1
    note = lm.note
    assert note == str(caught[0].message)
    assert f"'{arch}' model, which has no architecture row" in note and "register_architecture" in note
    assert floor.is_floor(lm.spec) and lm.is_causal and lm.n_layers == 3 and lm.n_heads == 4
    assert normviz.all_keys(lm) == list(floor.FLOOR_KEYS)


@pytest.mark.parametrize("arch", FLOOR_ARCHS)
def test_floor_maps_and_lens_are_the_models_own(arch):
    lm = floor_lm(arch)
    s = _session(lm)
    a = s.get()  # every default key of the model: the floor's two
    assert sorted(a.arrays) == ["attention", "rollout_attention"]
    assert a.notes["architecture"] == lm.note
    out = lm.head_model(torch.tensor([IDS]), output_attentions=True, output_hidden_states=True)
    want = torch.stack(out.attentions)[:, 0].numpy()
    assert a.arrays["attention"].shape == (3, 4, len(IDS), len(IDS))
    np.testing.assert_array_equal(a.arrays["attention"], want)
    np.testing.assert_allclose(
        a.arrays["rollout_attention"], rollout(attention_with_residual(want)), rtol=1e-12, atol=1e-15
    )
    np.testing.assert_array_equal(s.map("attention", 1, 2), want[1, 2])
    # the lens: each block's output through the model's own final norm and head (found, not named); the last
    # row is the model's own log-probabilities
    lens = s.logit_lens(-1)
    base = lm.model
    final_norm = getattr(base, lm.spec.final_norm)
    hidden = [h[0, -1] for h in out.hidden_states[:-1]]  # embedding output, then blocks 0 … L-2's outputs
    for layer, h in enumerate(hidden):
        ref = torch.log_softmax(lm.head_model.lm_head(final_norm(h)), -1).numpy()
        np.testing.assert_allclose(lens[layer], ref, rtol=1e-10, atol=1e-12, err_msg=f"lens row {layer}")
    np.testing.assert_allclose(lens[-1], torch.log_softmax(out.logits[0, -1], -1).numpy(), rtol=1e-12, atol=1e-12)
    assert s.predict(1)[0].id == int(out.logits[0, -1].argmax())


@pytest.mark.parametrize("arch", FLOOR_ARCHS)
def test_everything_else_is_refused_per_key_with_the_note(arch):
    lm = floor_lm(arch)
    s = _session(lm)
    got = s.get(["attention", "norm", "attn_res_ln", "ff_res", "rollout_attn_res"], strict=False)
    assert list(got.arrays) == ["attention"]
    for key in ("norm", "attn_res_ln", "ff_res"):
        assert got.refused[key] == f"{key!r} is not available: {lm.note}"
    assert lm.note in got.refused["rollout_attn_res"]
    with pytest.raises(NotApplicableError, match="is not available: .*no architecture row"):
        s.get(["norm"])
    assert s.refusal("norm_layer").endswith(lm.note) and s.refusal("rollout_attention") is None
    calls = {
        "explain": lambda: s.explain(),
        "attend": lambda: s.attend(0, 0),
        "knockout": lambda: s.knockout(),
        "ablate_heads": lambda: s.ablate_heads(),
        "graph": lambda: normviz.graph(s),
        "routes": lambda: normviz.routes(s),
    }
    for what, call in calls.items():
        with pytest.raises(NotApplicableError) as exc:
            call()
        assert str(exc.value) == f"{what} is not available: {lm.note}"


def test_a_row_that_refuses_the_config_gives_the_floor_with_its_reason():
    cfg = tf.LlamaConfig(
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=50,
        hidden_act="tanh",
    )
    model = tf.LlamaForCausalLM(cfg).double().eval()
    with pytest.warns(FloorWarning):
        lm = normviz.from_model(model, None, name="tanh-llama")
    if not floor.is_floor(lm.spec):
        pytest.skip("the llama row now splits a gated tanh FF exactly: pick another config its row refuses")
    assert "tanh" in lm.note and "'tanh-llama'" in lm.note and "register_architecture('llama'" in lm.note
    a = _session(lm, [3, 4, 5]).get()
    assert sorted(a.arrays) == ["attention", "rollout_attention"]


def test_an_encoder_decoder_without_a_row_is_refused_at_load():
    cfg = tf.PegasusConfig(
        vocab_size=50,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=16,
        decoder_ffn_dim=16,
    )
    if "pegasus" in ARCHITECTURES:
        pytest.skip("pegasus has an architecture row now")
    with pytest.raises(UnsupportedModelError, match="'pegasus' encoder–decoder, which has no architecture row"):
        normviz.from_model(tf.PegasusForConditionalGeneration(cfg), None)


@pytest.fixture(scope="module")
def bloom_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("bloom")
    model = raw("bloom", torch.float32)
    model.save_pretrained(path)
    tokenizer().save_pretrained(path)
    return path


def test_load_and_cli_export_on_the_floor(bloom_dir, tmp_path, capsys):
    with pytest.warns(FloorWarning):
        lm = normviz.load(str(bloom_dir))
    assert floor.is_floor(lm.spec) and lm.head_model is not None and lm.note.startswith(f"{str(bloom_dir)!r}")
    out = tmp_path / "x.npz"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FloorWarning)
        assert (
            cli_main(["export", "--model", str(bloom_dir), "--text", "the cat sat on the mat", "--out", str(out)]) == 0
        )
    err = capsys.readouterr().err
    assert "note: architecture: " in err and "has no architecture row" in err
    got = np.load(out)
    assert {"attention", "rollout_attention", "tokens"} <= set(got.files) and "norm" not in got.files
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FloorWarning)
        code = cli_main(
            [
                "export",
                "--model",
                str(bloom_dir),
                "--text",
                "the cat",
                "--maps",
                "norm",
                "--out",
                str(tmp_path / "y.npz"),
            ]
        )
    assert code != 0 and "'norm' is not available" in capsys.readouterr().err
