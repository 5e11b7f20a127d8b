"""Encoder–decoder cost: one teacher-forced forward pass (with attentions) against normviz's maps on the same
input, on a random Marian-base-shaped model (6 + 6 layers, 8 heads, d = 512, FF 2048, float32, CPU).

    PYTHONPATH=. python benchmarks/bench_seq2seq.py [--n 32] [--repeats 5]

Configurations alternate in one process (benchmarks/timing.py); ratios are against the forward pass measured
in the same run, since this machine is shared."""

from __future__ import annotations

import argparse

import torch
import transformers as tf

import normviz
from benchmarks.timing import alternate


def model(vocab: int = 1000):
    cfg = tf.MarianConfig(
        vocab_size=vocab,
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        max_position_embeddings=512,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    torch.manual_seed(0)
    return tf.MarianMTModel(cfg).eval()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads (on a shared, loaded machine 2 threads ran a forward pass 14× slower than 1)",
    )
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lm = normviz.from_model(model(), None, name="marian-base-shaped")
    g = torch.Generator().manual_seed(1)
    src = torch.randint(2, 1000, (args.n,), generator=g).tolist()
    tgt = [0] + torch.randint(2, 1000, (args.n - 1,), generator=g).tolist()
    from normviz.record.encdec.record import record_seq2seq

    def session():  # a fresh session on given ids (the benchmark model has no tokenizer)
        return normviz.Session.from_ids(lm, src, tgt)

    def forward():
        with torch.no_grad():
            x = torch.tensor([src])
            lm.model(input_ids=x, decoder_input_ids=torch.tensor([tgt]), output_attentions=True, use_cache=False)

    runs = {
        "forward + attentions": forward,
        "record": lambda: record_seq2seq(lm, src, tgt),
        "cross keys": lambda: session().get(
            ["cross_attention", "cross_norm", "cross_norm_layer", "cross_source_share"]
        ),
        "decoder keys": lambda: session().get(["decoder_attention", "decoder_norm", "decoder_attn_res_ln"]),
        "encoder norm family": lambda: session().get(["encoder_norm", "encoder_attn_res_ln"]),
        "all default keys": lambda: session().get(None),
    }
    _, med = alternate(runs, args.repeats)
    base = med["forward + attentions"]
    print(f"n = m = {args.n}, {args.threads} thread(s), median of {args.repeats}")
    for name, t in med.items():
        print(f"| {name} | {t * 1000:.0f} ms | {t / base:.2f}× |")


if __name__ == "__main__":
    main()
