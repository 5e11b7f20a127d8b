"""Equivalence check of the norm family (attention, norm, norm_layer, attn_res, attn_res_ln) across code versions
and backends.

    python benchmarks/check_norms_equivalence.py --save ref.npz    # on the old code: reference outputs
    python benchmarks/check_norms_equivalence.py --check ref.npz   # on the new code: compare with them

Models: tiny random float64 models of bert, distilbert, gpt2, llama, qwen3 (the configurations of tests/tiny.py,
copied here so that this script does not depend on the test suite's layout) and a random minilm-sized float32
BERT (6 layers, 12 heads, d=384, d_ff=1536). Each is run with the compiled kernels and with the torch backend
(``kernels.available`` patched to False), on every key together and on subsets of keys (the code paths differ).

Checks (each printed with its worst relative difference, max |a − b| / max |b| per map):
  * float64: new vs saved reference ≤ 1e-12, kernels vs torch ≤ 1e-12;
  * float32: new vs saved reference and kernels vs torch ≤ 1e-5 (float32 rounding of sums over d = 384 and
    H = 12 terms; the saved kernels-vs-torch spread of the old code is printed next to it for comparison);
  * every subset of keys gives the same bits as all keys together (same backend).
Exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys

import numpy as np
import torch
import transformers as tf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import normviz  # noqa: E402
from normviz.core.tokens import Encoded  # noqa: E402
from normviz.methods.norms import kernels  # noqa: E402
from tools.tiny import randomize_weights  # noqa: E402

KEYS = ["attention", "norm", "norm_layer", "attn_res", "attn_res_ln"]
SUBSETS = [
    ["norm"],
    ["attn_res_ln"],
    ["attn_res"],
    ["norm_layer"],
    ["norm", "attn_res"],
    ["attention", "norm_layer", "attn_res_ln"],
]
COMMON = dict(vocab_size=97)


def _tiny_config(arch: str):
    return {
        "bert": lambda: tf.BertConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
            **COMMON,
        ),
        "distilbert": lambda: tf.DistilBertConfig(
            dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64, **COMMON
        ),
        "gpt2": lambda: tf.GPT2Config(
            n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0, **COMMON
        ),
        "llama": lambda: tf.LlamaConfig(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=48,
            max_position_embeddings=64,
            bos_token_id=1,
            eos_token_id=2,
            **COMMON,
        ),
        "qwen3": lambda: tf.Qwen3Config(
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=8,
            intermediate_size=48,
            max_position_embeddings=64,
            bos_token_id=1,
            eos_token_id=2,
            **COMMON,
        ),
    }[arch]()


def tiny_model(arch: str):
    config = _tiny_config(arch)
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tf.AutoModel.from_config(config, attn_implementation="eager").to(torch.float64).eval()
    randomize_weights(model)
    return normviz.from_model(model, None, name=f"tiny-{arch}")


def minilm_model():
    torch.manual_seed(0)
    cfg = tf.BertConfig(
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=12,
        intermediate_size=1536,
        max_position_embeddings=512,
        vocab_size=1000,
    )
    cfg._attn_implementation = "eager"
    model = tf.BertModel(cfg, add_pooling_layer=False).eval()
    return normviz.from_model(model, None, name="minilm-random")


def encoded(n: int, seed: int = 1, vocab: int = 97) -> Encoded:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (n,), generator=g).tolist()
    return Encoded(
        ids=ids, tokens=[f"t{i}" for i in ids], labels=[f"t{i}" for i in ids], special=[False] * n, dropped=0
    )


CASES = [(arch, n) for arch in ("bert", "distilbert", "gpt2", "llama", "qwen3") for n in (9, 17)] + [
    ("minilm", 37),
    ("minilm", 64),
]


@contextlib.contextmanager
def torch_backend(on: bool):
    saved = kernels.available
    if on:
        kernels.available = lambda: False
    try:
        yield
    finally:
        kernels.available = saved


def compute(lm, n: int, keys, torch_only: bool) -> dict[str, np.ndarray]:
    vocab = 97 if lm.name.startswith("tiny") else 1000
    with torch_backend(torch_only):
        a = normviz.Session.from_encoded(lm, [encoded(n, vocab=vocab)])[0].get(keys)
    return {k: np.array(a.arrays[k]) for k in keys}


def rel(a: np.ndarray, b: np.ndarray) -> float:
    if a.shape != b.shape:
        return float("inf")
    scale = max(float(np.abs(b).max()), 1e-300)
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max() / scale)


def all_outputs() -> dict[str, np.ndarray]:
    out = {}
    models = {}
    for arch, n in CASES:
        if arch not in models:
            models[arch] = minilm_model() if arch == "minilm" else tiny_model(arch)
        lm = models[arch]
        for backend in ("kernels", "torch"):
            res = compute(lm, n, KEYS, backend == "torch")
            for k, v in res.items():
                out[f"{arch}/{n}/{backend}/{k}"] = v
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", metavar="NPZ")
    g.add_argument("--check", metavar="NPZ")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    print(f"normviz from {normviz.__file__}; numba kernels available: {kernels.available()}")
    out = all_outputs()
    if args.save:
        np.savez_compressed(args.save, **out)
        print(f"saved {len(out)} arrays to {args.save}")
        return 0
    ref = dict(np.load(args.check))
    failures = []

    def report(what: str, value: float, tol: float) -> None:
        ok = value <= tol
        if not ok:
            failures.append(what)
        print(f"  {'ok  ' if ok else 'FAIL'} {what:60s} {value:9.2e}  (≤ {tol:.0e})")

    models = {}
    for arch, n in CASES:
        f64 = arch != "minilm"
        tol = 1e-12 if f64 else 1e-5
        print(f"{arch} n={n} ({'float64' if f64 else 'float32'})")
        for backend in ("kernels", "torch"):
            worst = max(rel(out[f"{arch}/{n}/{backend}/{k}"], ref[f"{arch}/{n}/{backend}/{k}"]) for k in KEYS)
            report(f"{backend}: new vs reference, worst key", worst, tol)
        worst = max(rel(out[f"{arch}/{n}/kernels/{k}"], out[f"{arch}/{n}/torch/{k}"]) for k in KEYS)
        old = max(rel(ref[f"{arch}/{n}/kernels/{k}"], ref[f"{arch}/{n}/torch/{k}"]) for k in KEYS)
        report(f"kernels vs torch, worst key (old code: {old:.1e})", worst, tol)
        if arch not in models:
            models[arch] = minilm_model() if arch == "minilm" else tiny_model(arch)
        for backend, keys in itertools.product(("kernels", "torch"), SUBSETS):
            res = compute(models[arch], n, keys, backend == "torch")
            worst = max(rel(res[k], out[f"{arch}/{n}/{backend}/{k}"]) for k in keys)
            report(f"{backend}: keys {'+'.join(keys)} vs all keys", worst, 0.0)
    print("all checks passed" if not failures else f"{len(failures)} checks FAILED")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
