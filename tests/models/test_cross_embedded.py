"""The cross-layer and alternative maps on the embedded models (float32), through the API and the CLI."""

from __future__ import annotations

import numpy as np
import pytest

import normviz
from normviz.cli import main
from normviz.core.tokens import encode, pad_batch
from normviz.methods.effective import head_vectors64
from normviz.record.decompose import LayerDecomposition
from normviz.record.recorder import record

NEW = [
    "rollout_attention",
    "rollout_attn_res",
    "rollout_attn_res_ln",
    "rollout_ff_res",
    "effective_attention",
    "alti",
    "rollout_alti",
    "value_zeroing",
]


def check_invariants(a, causal: bool):
    for key in a.keys():
        arr = a[key]
        assert np.all(np.isfinite(arr)), key
        if key == "effective_attention" or key == "attention":
            continue
        if key.startswith(("rollout", "alti", "value_zeroing", "flow")):
            np.testing.assert_allclose(arr.sum(-1), 1, atol=1e-5, err_msg=key)
            assert np.all(arr >= 0), key
        if causal:
            assert np.all(np.triu(arr, 1) == 0), key


def test_minilm_all_new_keys(minilm):
    a = normviz.analyze(
        minilm, "The cat sat on the mat because it was warm.", methods=NEW + ["rollout_ff_res_ln", "flow", "attention"]
    )
    n = a.n_tokens
    for key in NEW + ["rollout_ff_res_ln", "flow"]:
        assert a[key].shape == ((6, 12, n, n) if key == "effective_attention" else (6, n, n)), key
    check_invariants(a, causal=False)
    np.testing.assert_array_equal(a["effective_attention"], a["attention"])  # n = 13 ≤ head size 32
    assert a.notes["rollout_attention"].startswith("standard")


def test_minilm_effective_attention_beyond_head_size(minilm):
    """37 tokens > head size 32: rank(T^h) = 32, rows change, α̃·T = α·T (T in float64 from the weights)."""
    text = (
        "A long sentence with many different words keeps going so that the number of tokens grows well beyond "
        "the head size of thirty two tokens in this small encoder model today"
    )
    enc = encode(minilm.tokenizer, text, None, max_length=512)
    assert len(enc.ids) > 36
    ids, mask = pad_batch([enc])
    recs = record(minilm, ids, mask)[0]
    a = normviz.analyze(minilm, text, methods=["attention", "effective_attention"])
    for layer in (0, 5):
        ctx = LayerDecomposition(recs[layer], minilm.layer_params(layer), index=layer)
        t = head_vectors64(ctx).numpy()
        eff, att = a["effective_attention"][layer].astype(np.float64), a["attention"][layer].astype(np.float64)
        assert np.abs(eff - att).max() > 1e-2
        scale = np.abs(att @ t).max()
        assert np.abs(eff @ t - att @ t).max() < 1e-5 * scale


def test_cli_export_writes_new_keys_and_notes(tmp_path, capsys):
    out = tmp_path / "x.npz"
    rc = main(
        [
            "export",
            "--model",
            "minilm",
            "--text",
            "Hello world, again.",
            "--out",
            str(out),
            "--methods",
            "rollout_attention,alti,rollout_alti,flow",
            "--option",
            "rollout_normalization=receptive_field",
        ]
    )
    assert rc == 0
    z = np.load(out)
    assert {"tokens", "attention", "rollout_attention", "alti", "rollout_alti", "flow"} <= set(z.files)
    err = capsys.readouterr().err
    assert "note: rollout_attention" in err and "ignored" in err  # an encoder: the option changes nothing


def test_cli_refuses_long_flow_with_a_message(tmp_path, capsys):
    rc = main(
        [
            "export",
            "--model",
            "minilm",
            "--text",
            " ".join(["word"] * 298),
            "--out",
            str(tmp_path / "y.npz"),
            "--methods",
            "flow",
        ]
    )
    assert rc == 2
    assert "flow_max_tokens" in capsys.readouterr().err
    assert not (tmp_path / "y.npz").exists()


@pytest.mark.slow
def test_smollm2_all_new_keys(smollm2):
    lm = smollm2
    keys = [k for k in NEW if k != "rollout_ff_res"]  # the FF maps of a 30-layer SwiGLU model take the most time
    a = normviz.analyze(
        lm,
        "The cat sat on the mat and the dog sat too.",
        methods=keys + ["attention"],
        options={"rollout_normalization": "receptive_field"},
    )
    assert a["value_zeroing"].shape == (30, a.n_tokens, a.n_tokens)
    check_invariants(a, causal=True)
    assert "receptive-field" in a.notes["rollout_attn_res_ln"]
    for key in ("rollout_attn_res_ln", "rollout_alti"):  # a baseline with the residual: no pile-up on the diagonal
        assert a[key][-1, -1, -1] < 0.5, key
    # "the" repeats: at layer 0 (no position in the values) its copies are unidentifiable, later layers not
    eff, att = a["effective_attention"], a["attention"]
    assert np.abs(eff[0] - att[0]).max() > 1e-3
    np.testing.assert_array_equal(eff[1:], att[1:])
