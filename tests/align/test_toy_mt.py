"""The shipped toy-mt model: small, float32, word-level, and it translates its held-out sentences."""

from __future__ import annotations

import json
from pathlib import Path

import normviz

TOY = Path(__file__).resolve().parents[2] / "assets" / "toy_mt"


def test_toy_mt_is_small_float32_marian():
    cfg = json.loads((TOY / "config.json").read_text())
    assert cfg["model_type"] == "marian" and cfg["decoder_start_token_id"] == cfg["pad_token_id"]
    assert sum(p.stat().st_size for p in TOY.iterdir() if p.is_file()) < 8 * 2**20
    lm = normviz.load("toy-mt")
    assert str(lm.dtype) == "torch.float32" and lm.config.is_encoder_decoder


def test_toy_mt_translates_held_out_sentences():
    lm = normviz.load("toy-mt")
    src = (TOY / "data" / "test.src").read_text(encoding="utf-8").splitlines()[:5]
    tgt = (TOY / "data" / "test.tgt").read_text(encoding="utf-8").splitlines()[:5]
    got = [normviz.Session(lm, s).get(["cross_attention"]).target_text.strip() for s in src]
    assert sum(g == t for g, t in zip(got, tgt)) >= 4, list(zip(got, tgt))


def test_toy_mt_tokens_are_words():
    lm = normviz.load("toy-mt")
    a = normviz.Session(lm, "the cat sees a dog", target="mao vidas un inu").get(["cross_attention"])
    assert list(a.src_tokens) == ["the", "cat", "sees", "a", "dog", "</s>"]
    assert list(a.tgt_tokens) == ["<pad>", "mao", "vidas", "un", "inu"]
