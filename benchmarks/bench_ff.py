"""The feed-forward maps (ff, ff_res, ff_res_ln) against the machine's own float32 GEMM rate.

    python benchmarks/bench_ff.py [--n 32 128 512] [--markdown] [--no-gated]

Model: random BERT-base-sized encoder (12 layers, 12 heads, d=768, d_ff=3072), float32, on the CPU; the gated
line: a random SmolLM2-135M-shaped Llama (30 layers, 9 heads / 3 KV heads, d=576, d_ff=1536, SwiGLU).
The forward pass (recording) is not timed: the time is that of ``feedforward.ff_maps`` on every recorded
layer, each layer's cached quantities dropped first (so its head vectors, projections etc. count), which is
what ``Session.get(["ff", "ff_res", "ff_res_ln"])`` spends after the recording pass.
At large n only the first ``--layers`` layers are timed (every layer has the same shapes) and the time is
scaled to all layers; the table says how many were timed.

FLOPs counted (multiply-adds ×2), per layer, over the P = n² pairs (a causal model: P = n(n+1)/2, the pairs
i ≥ j, the only ones ff_maps computes), H heads; the same terms as ``feedforward.flops``:
  W_out product        2·P·d_ff·d              (the dominant term)
  pre-activation mix   2·P·H·d_ff              Σ_h α^h_ij q^h_j  (×2 for a gated unit: gate and up)
  residual mix         2·P·H·d                 Σ_h α^h_ij N(f^h_j)  (ff_res)
Not counted: the per-layer projections of the head vectors through W_in (O(n·H·d·d_ff), ~H/n of the W_out
term), the element-wise work (activation factors, norms) and the first norm's centring.

GEMM baseline: a plain float32 ``torch.mm`` of [n·c, d_ff] @ [d_ff, d] with c the row chunk the FF maps use
for that n, timed in the same process, interleaved with the FF runs (before and after each), median of those
blocks; the shared 2-core machine drifts by ±20 % from minute to minute.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import transformers as tf  # noqa: E402

import normviz  # noqa: E402
from normviz.core.tokens import Encoded  # noqa: E402
from normviz.methods import feedforward  # noqa: E402


def ff_flops(n_layers: int, n: int, heads: int, d: int, d_ff: int, gated: bool, causal: bool) -> dict[str, float]:
    """The terms of ``feedforward.flops`` (the cost estimate), counted over the pairs a causal model needs."""
    pairs = n * (n + 1) / 2 if causal else n * n
    return {
        "w_out": 2.0 * n_layers * pairs * d_ff * d,
        "mix_in": 2.0 * n_layers * pairs * heads * d_ff * (2 if gated else 1),
        "mix_res": 2.0 * n_layers * pairs * heads * d,
    }


def bert_base():
    cfg = tf.BertConfig(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        max_position_embeddings=512,
        vocab_size=30522,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tf.BertModel(cfg, add_pooling_layer=False).eval()
    return normviz.from_model(model, None, name="bert-base-random"), ["ff", "ff_res", "ff_res_ln"]


def smollm2_like():
    cfg = tf.LlamaConfig(
        hidden_size=576,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        intermediate_size=1536,
        max_position_embeddings=2048,
        vocab_size=1000,
        bos_token_id=1,
        eos_token_id=2,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tf.LlamaModel(cfg).eval()
    return normviz.from_model(model, None, name="smollm2-135m-shaped-random"), ["ff", "ff_res"]


def encoded(n: int) -> Encoded:
    g = torch.Generator().manual_seed(n)
    ids = torch.randint(3, 1000, (n,), generator=g).tolist()
    return Encoded(ids=ids, tokens=[""] * n, labels=[""] * n, special=[False] * n, dropped=0)


def rows_per_chunk(ctx) -> int:
    if hasattr(feedforward, "rows_per_chunk"):
        return feedforward.rows_per_chunk(ctx)
    d_ff, d = ctx.p.w_out.shape  # the row chunk of the code before benchmarks/bench_ff.py existed
    return next(iter(ctx.row_chunks((3 * d_ff + 6 * d) * ctx.rec.x.element_size()))).stop


def gemm_rate(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, seconds: float = 1.0) -> float:
    torch.mm(a, b, out=out)
    reps, start = 0, time.perf_counter()
    while True:
        torch.mm(a, b, out=out)
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return 2.0 * a.shape[0] * a.shape[1] * b.shape[1] * reps / elapsed


def measure(lm, keys, n: int, layers: int | None, repeats: int, gemm_seconds: float) -> dict:
    session = normviz.Session.from_encoded(lm, [encoded(n)])[0]
    views = session.layers()  # the recording pass, not timed
    timed = views[: layers or len(views)]
    p = timed[0].p
    d_ff, d = p.w_out.shape
    c = rows_per_chunk(timed[0])
    a, b = torch.randn(n * c, d_ff), torch.randn(d_ff, d)
    out = torch.empty(n * c, d)

    def run_ff() -> float:
        start = time.perf_counter()
        for ctx in timed:
            ctx.clear()
            feedforward.ff_maps(ctx, keys)
            ctx.clear()
        return time.perf_counter() - start

    small = views[0]  # warm-up on one layer: allocator, first-call costs
    feedforward.ff_maps(small, keys)
    small.clear()
    gemm = [gemm_rate(a, b, out, gemm_seconds)]
    ff = []
    for _ in range(repeats):
        ff.append(run_ff())
        gemm.append(gemm_rate(a, b, out, gemm_seconds))
    flops = ff_flops(len(timed), n, p.n_heads, d, d_ff, p.ff_kind != "mlp", lm.spec.causal)
    t = statistics.median(ff)
    g = statistics.median(gemm)
    total = sum(flops.values())
    return {
        "model": lm.name,
        "n": n,
        "layers_timed": len(timed),
        "n_layers": len(views),
        "chunk_rows": c,
        "seconds": t * len(views) / len(timed),
        "seconds_timed": t,
        "flops": total * len(views) / len(timed),
        "flops_w_out": flops["w_out"] * len(views) / len(timed),
        "ff_rate": total / t,
        "gemm_rate": g,
        "ratio": total / t / g,
        "repeats": repeats,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="*", default=[32, 128, 512])
    ap.add_argument(
        "--repeats", type=int, default=None, help="FF runs per n (default: 3 at n ≤ 32, 2 at n ≤ 128, else 1)"
    )
    ap.add_argument("--layers", type=int, default=None, help="layers timed (default: all at n ≤ 128, else 1; gated: 6)")
    ap.add_argument("--gemm-seconds", type=float, default=1.0, help="length of each GEMM timing block")
    ap.add_argument("--gated-n", type=int, default=128, help="tokens of the gated line")
    ap.add_argument("--no-gated", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    torch.set_grad_enabled(False)
    print(
        f"normviz from {os.path.dirname(normviz.__file__)}; torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads, {platform.processor() or platform.machine()}",
        flush=True,
    )
    rows = []
    lm, keys = bert_base()
    for n in args.n:
        layers = args.layers or (None if n <= 128 else 1)
        repeats = args.repeats or (3 if n <= 32 else 2 if n <= 128 else 1)
        rows.append(measure(lm, keys, n, layers, repeats, args.gemm_seconds))
        r = rows[-1]
        print(
            f"{r['model']} n={n}: {r['seconds']:.2f} s ({r['layers_timed']}/{r['n_layers']} layers timed), "
            f"{r['ff_rate'] / 1e9:.1f} GFLOP/s vs GEMM {r['gemm_rate'] / 1e9:.1f} GFLOP/s: {r['ratio']:.0%}",
            flush=True,
        )
    if not args.no_gated:
        lm, keys = smollm2_like()
        rows.append(measure(lm, keys, args.gated_n, args.layers or 6, args.repeats or 2, args.gemm_seconds))
        r = rows[-1]
        print(f"{r['model']} n={r['n']}: {r['seconds']:.2f} s, {r['ratio']:.0%} of GEMM", flush=True)
    head = (
        "| model | n | layers timed | rows/chunk | FF maps time (all layers) | FLOPs (W_out) | FLOPs counted "
        "| FF GFLOP/s | GEMM GFLOP/s | FF / GEMM |"
    )
    if args.markdown:
        print("\n" + head + "\n|" + "---|" * 10)
    for r in rows:
        cells = [
            r["model"],
            r["n"],
            f"{r['layers_timed']}/{r['n_layers']}",
            r["chunk_rows"],
            f"{r['seconds']:.2f} s",
            f"{r['flops_w_out']:.2e}",
            f"{r['flops']:.2e}",
            f"{r['ff_rate'] / 1e9:.1f}",
            f"{r['gemm_rate'] / 1e9:.1f}",
            f"{r['ratio']:.0%}",
        ]
        print(("| " + " | ".join(map(str, cells)) + " |") if args.markdown else "  ".join(map(str, cells)))


if __name__ == "__main__":
    main()
