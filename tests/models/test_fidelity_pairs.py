"""Sentence pairs are the model's real pair forward pass: encoders get the tokenizer's segment ids, decoders
a documented separator (issue 10, item 1). Self-contained: tiny random float64 models built here, with the
embedded models' tokenizers."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as tf

import normviz
from normviz.core.tokens import decoder_pair_ids, encode, pad_batch
from normviz.models.loading import _minilm_dir, smollm2_dir

from ..helpers.tiny import randomize_weights

A, B = "The cat sat on the mat.", "It was very happy there."


def _tiny(config, tokenizer, seed=0):
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    model = tf.AutoModel.from_config(config, attn_implementation="eager").to(torch.float64).eval()
    randomize_weights(model)
    return normviz.from_model(model, tokenizer, name="tiny")


@pytest.fixture(scope="module")
def bert_tok():
    return tf.AutoTokenizer.from_pretrained(str(_minilm_dir()))


@pytest.fixture(scope="module")
def tiny_bert(bert_tok):
    cfg = tf.BertConfig(
        vocab_size=bert_tok.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        type_vocab_size=2,
    )
    lm = _tiny(cfg, bert_tok)
    with torch.no_grad():  # segment embeddings that matter
        lm.model.embeddings.token_type_embeddings.weight.normal_(0.0, 1.0)
    return lm


def _independent_attn_res(model, layer: int, x: torch.Tensor, alpha: torch.Tensor) -> np.ndarray:
    """‖Σ_h α^h_ij f^h(x_j) + δ_ij x_j‖ from the BERT layer's weights, for its input x [n, d]."""
    att = model.encoder.layer[layer].attention
    H = att.self.num_attention_heads
    n, d = x.shape
    v = att.self.value(x).reshape(n, H, d // H).transpose(0, 1)  # [H, n, dh]
    w_o = att.output.dense.weight.T.reshape(H, d // H, d)  # rows of W^O per head
    f = torch.einsum("hnk,hkd->hnd", v, w_o)
    u = torch.einsum("hij,hjd->ijd", alpha, f) + torch.diag_embed(torch.ones(n, dtype=x.dtype))[..., None] * x[None]
    return u.norm(dim=-1).numpy()


def test_pair_segment_ids_reach_the_model(tiny_bert, bert_tok):
    s = normviz.Session(tiny_bert, A, B)
    ref = bert_tok(A, B)
    assert s.encoded.ids == ref["input_ids"] and s.encoded.token_type_ids == ref["token_type_ids"]
    assert 1 in s.encoded.token_type_ids
    a = s.get(["attention", "attn_res"])
    assert "segment ids" in a.notes["pair"]
    t = bert_tok(A, B, return_tensors="pt")
    with torch.no_grad():
        out = tiny_bert.model(**t, output_attentions=True, output_hidden_states=True)
        plain = tiny_bert.model(input_ids=t["input_ids"], output_attentions=True)
    for l in range(tiny_bert.n_layers):
        np.testing.assert_allclose(a["attention"][l], out.attentions[l][0].numpy(), rtol=0, atol=1e-12)
        expected = _independent_attn_res(tiny_bert.model, l, out.hidden_states[l][0], out.attentions[l][0])
        err = np.abs(a["attn_res"][l] - expected).max() / np.abs(expected).max()
        assert err < 1e-9, (l, err)
    # without segment ids the maps would differ visibly: the test would catch a pass that drops them
    assert np.abs(a["attention"][0] - plain.attentions[0][0].numpy()).max() > 1e-3


def test_single_sentence_unchanged_and_batch_pads_segment_ids(tiny_bert):
    single = normviz.Session(tiny_bert, A)
    assert "pair" not in single.get(["attention"]).notes
    pair = normviz.Session(tiny_bert, A, B).get(["attention", "attn_res_ln"])
    batch = normviz.Session.batch(tiny_bert, [A, (A, B), ("Short.", "Pair.")])
    ids, mask, types = pad_batch([s.encoded for s in batch], with_token_types=True)
    assert types.shape == ids.shape and int(types[0].sum()) == 0 and int(types[1].sum()) > 0
    assert int((types * (1 - mask)).abs().sum()) == 0  # padding carries segment 0
    got = batch[1].get(["attention", "attn_res_ln"])
    for k in ("attention", "attn_res_ln"):
        np.testing.assert_allclose(got[k], pair[k], rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        batch[0].get(["attention"])["attention"], single.get(["attention"])["attention"], rtol=0, atol=1e-12
    )


def test_corpus_batches_pass_segment_ids(tiny_bert):
    from normviz.corpus.chunks import batch_maps

    enc = encode(tiny_bert.tokenizer, A, B)
    got = batch_maps(tiny_bert, [encode(tiny_bert.tokenizer, "x y", None), enc], ["attention"])[1]["attention"]
    ref = normviz.Session(tiny_bert, A, B).get(["attention"])["attention"]
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)


def test_model_without_segment_embeddings_says_so(bert_tok):
    cfg = tf.DistilBertConfig(
        vocab_size=bert_tok.vocab_size, dim=32, n_layers=1, n_heads=4, hidden_dim=64, max_position_embeddings=64
    )
    lm = _tiny(cfg, bert_tok)
    a = normviz.Session(lm, A, B).get(["attention"])
    assert "not passed" in a.notes["pair"] or "no segment ids" in a.notes["pair"]


@pytest.fixture(scope="module")
def decoder_tok():
    return tf.AutoTokenizer.from_pretrained(str(smollm2_dir()))


def test_decoder_pair_joined_with_separator(decoder_tok):
    cfg = tf.LlamaConfig(
        vocab_size=len(decoder_tok),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=48,
        max_position_embeddings=128,
    )
    lm = _tiny(cfg, decoder_tok)
    s = normviz.Session(lm, A, B)
    sep = decoder_tok.sep_token_id if decoder_tok.sep_token_id is not None else decoder_tok.eos_token_id
    expected = decoder_tok(A)["input_ids"] + [sep] + decoder_tok(B, add_special_tokens=False)["input_ids"]
    assert s.encoded.ids == expected and s.encoded.token_type_ids is None
    a = s.get(["attention"])
    assert "joined" in a.notes["pair"] and repr(decoder_tok.convert_ids_to_tokens(sep)) in a.notes["pair"]
    with torch.no_grad():
        out = lm.model(input_ids=torch.tensor([expected]), output_attentions=True)
    np.testing.assert_allclose(a["attention"][1], out.attentions[1][0].numpy(), rtol=0, atol=1e-12)


class _NoSeparators:
    """A tokenizer without sep and eos tokens (delegates everything else)."""

    sep_token_id = eos_token_id = sep_token = eos_token = None

    def __init__(self, tok):
        self._tok = tok

    def __call__(self, *args, **kwargs):
        return self._tok(*args, **kwargs)


def test_decoder_pair_newline_fallback(decoder_tok):
    ids, note = decoder_pair_ids(_NoSeparators(decoder_tok), A, B)
    assert ids == decoder_tok(f"{A}\n{B}")["input_ids"] and "newline" in note
