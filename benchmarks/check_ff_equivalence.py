"""Check that the FF maps (ff, ff_res, ff_res_ln) agree with saved reference outputs and with themselves.

    python benchmarks/check_ff_equivalence.py --save ref.pt   # once, on the code to compare against
    python benchmarks/check_ff_equivalence.py --ref ref.pt    # after a change

Cases: tiny random float64 models (bert, distilbert, gpt2, llama; tests/tiny.py's construction) at n = 9 and
23, and a 2-layer BERT-base-width (d=768, d_ff=3072) random float32 model at n = 40. Checks:

  * against the reference: ≤ 1e-12 relative (max |Δ| / max |ref| per key) in float64, ≤ 1e-5 in float32
  * chunked (option chunk_bytes=4096: one or a few rows per chunk) against unchunked: same tolerances
  * the norms of :func:`normviz.methods.feedforward.ff_vectors` (the per-pair vectors the exactness tests
    use) against :func:`ff_maps` (same tolerances), and Σ_j ff_res part_ij + bias_i = the model's own vector
    (≤ 1e-6 in float64: llama's RMSNorm runs in float32 even in a float64 model; ≤ 1e-4 in float32)
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import torch  # noqa: E402
import transformers as tf  # noqa: E402

import normviz  # noqa: E402
from normviz.methods import feedforward  # noqa: E402
from tools.tiny import build as tiny_model  # noqa: E402
from tools.tiny import encoded

KEYS = ["ff", "ff_res", "ff_res_ln"]
TOL = {torch.float64: 1e-12, torch.float32: 1e-5}


def bert_sized_f32():
    cfg = tf.BertConfig(
        hidden_size=768,
        num_hidden_layers=2,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=64,
        vocab_size=97,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tf.AutoModel.from_config(cfg, attn_implementation="eager").eval()
    return normviz.from_model(model, None, name="bert768-f32")


def cases():
    for arch in ("bert", "distilbert", "gpt2", "llama"):
        lm = tiny_model(arch)
        for n in (9, 23):
            yield f"{arch}/n{n}", lm, encoded(n)
    yield "bert768-f32/n40", bert_sized_f32(), encoded(40)


def maps(lm, enc, options=None) -> dict[str, torch.Tensor]:
    a = normviz.Session.from_encoded(lm, [enc], options=options)[0].get(KEYS, strict=False)
    return {k: torch.as_tensor(a.arrays[k]) for k in KEYS if k in a.arrays}


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).abs().max() / b.double().abs().max().clamp_min(1e-300))


def vector_checks(lm, enc) -> tuple[float, float]:
    """Worst relative error of (ff_vectors' norms vs ff_maps, Σ_j ff_res parts + bias vs the model's own vector:
    z_ff, the input of the norm after the FF (post-LN), or the next layer's input (pre-LN))."""
    layers = normviz.Session.from_encoded(lm, [enc])[0].layers()
    worst_norm = worst_sum = 0.0
    for i, ctx in enumerate(layers):
        keys = KEYS if ctx.p.norm_on_ff_residual is not None else KEYS[:2]
        got = feedforward.ff_maps(ctx, keys)
        vec = feedforward.ff_vectors(ctx, slice(0, ctx.n))
        for k, m in got.items():
            worst_norm = max(worst_norm, rel(m, vec[k][0].norm(dim=-1)))
        parts, bias = vec["ff_res"]
        target = ctx.rec.z_ff if ctx.rec.z_ff is not None else (layers[i + 1].rec.x if i + 1 < len(layers) else None)
        if target is not None:
            worst_sum = max(worst_sum, rel(parts.sum(1) + bias, target))
        ctx.clear()
    return worst_norm, worst_sum


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", help="write the current code's maps here")
    ap.add_argument("--ref", help="compare against maps written by --save")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    print("normviz from", normviz.__file__)
    if args.save:
        torch.save({name: maps(lm, enc) for name, lm, enc in cases()}, args.save)
        print("saved", args.save)
        return
    ref = torch.load(args.ref) if args.ref else None
    failed = False
    print(f"{'case':18s} {'key':10s} {'vs ref':>9s} {'chunked':>9s} {'tol':>7s}")
    for name, lm, enc in cases():
        tol = TOL[lm.dtype]
        got = maps(lm, enc)
        chunked = maps(lm, enc, {"chunk_bytes": 4096})
        if ref is not None and set(got) != set(ref[name]):
            print(f"{name}: keys {sorted(got)} vs reference {sorted(ref[name])}")
            failed = True
        for k in got:
            r = rel(got[k], ref[name][k]) if ref is not None and k in ref[name] else float("nan")
            c = rel(chunked[k], got[k])
            bad = r > tol or c > tol
            failed |= bad
            print(f"{name:18s} {k:10s} {r:9.1e} {c:9.1e} {tol:7.0e}" + ("  FAIL" if bad else ""))
        wn, ws = vector_checks(lm, enc)
        bad = wn > tol or ws > max(1e-6, 10 * tol)  # llama's RMSNorm computes in float32 even in float64
        failed |= bad
        print(
            f"{name:18s} ff_vectors norms vs ff_maps {wn:.1e}"
            f", Σ ff_res parts + bias vs model {ws:.1e}" + ("  FAIL" if bad else "")
        )
    print("FAILED" if failed else "all agree")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
