"""Train the embedded `toy-mt` model: a tiny MarianMT on the toy translation task of make_toy_translation.py.

A word-level tokenizer (one token per word; source and target share one vocabulary and the embeddings, as in
Opus-MT) and a 3+3-layer Marian (d_model 128, 4 heads, FF 256, SiLU as Opus-MT) trained on CPU with AdamW and
teacher forcing. The decoder starts with <pad>, as Marian models do. Saved with save_pretrained in float32 to
``assets/toy_mt/`` (model + tokenizer + generation config), which ``normviz.load("toy-mt")`` loads.

    python scripts/make_toy_translation.py          # writes assets/toy_mt/data/
    python scripts/train_toy_translation.py [--epochs 8 --threads 1 --out assets/toy_mt]

Prints held-out token accuracy (teacher forced) and exact match of greedy translations on valid and test.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
from make_toy_translation import vocabulary  # noqa: E402

SPECIALS = ["<pad>", "</s>", "<unk>"]


def build_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate(SPECIALS + vocabulary())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", vocab["</s>"])])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", model_max_length=64
    )


def build_model(vocab_size: int, pad: int, eos: int):
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=128,
        encoder_layers=3,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
        max_position_embeddings=64,
        activation_function="swish",
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=pad,
        forced_eos_token_id=eos,
        bos_token_id=None,
        architectures=["MarianMTModel"],
    )
    model = MarianMTModel(config)
    g = model.generation_config
    g.decoder_start_token_id, g.pad_token_id, g.eos_token_id = pad, pad, eos
    g.forced_eos_token_id, g.num_beams, g.bad_words_ids = eos, 1, None
    return model


def read(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]


def batches(src, tgt, tok, size, rng=None):
    idx = list(range(len(src)))
    if rng is not None:
        rng.shuffle(idx)
    for k in range(0, len(idx), size):
        chunk = idx[k : k + size]
        enc = tok([src[i] for i in chunk], text_target=[tgt[i] for i in chunk], padding=True, return_tensors="pt")
        labels = enc["labels"]
        labels[labels == tok.pad_token_id] = -100
        yield enc["input_ids"], enc["attention_mask"], labels


@torch.no_grad()
def evaluate(model, tok, src, tgt, size=100):
    model.eval()
    correct = total = exact = 0
    for ids, mask, labels in batches(src, tgt, tok, size):
        logits = model(input_ids=ids, attention_mask=mask, labels=labels).logits
        ok = (logits.argmax(-1) == labels) & (labels != -100)
        correct += int(ok.sum())
        total += int((labels != -100).sum())
    for k in range(0, len(src), size):
        enc = tok(src[k : k + size], padding=True, return_tensors="pt")
        out = model.generate(**enc, max_new_tokens=48, num_beams=1, do_sample=False)
        hyp = tok.batch_decode(out, skip_special_tokens=True)
        exact += sum(h.strip() == t for h, t in zip(hyp, tgt[k : k + size]))
    model.train()
    return correct / total, exact / len(src)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=ROOT / "assets" / "toy_mt" / "data")
    p.add_argument("--out", type=Path, default=ROOT / "assets" / "toy_mt")
    p.add_argument("--epochs", type=int, default=8)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)

    tok = build_tokenizer()
    model = build_model(len(tok), tok.pad_token_id, tok.eos_token_id)
    data = {s: (read(args.data / f"{s}.src"), read(args.data / f"{s}.tgt")) for s in ("train", "valid", "test")}
    unknown = {w for s in data.values() for side in s for line in side for w in line.split()} - set(tok.get_vocab())
    if unknown:
        raise SystemExit(f"words outside the vocabulary: {sorted(unknown)[:10]}")
    steps_per_epoch = math.ceil(len(data["train"][0]) / args.batch)
    total = steps_per_epoch * args.epochs
    warmup = min(300, total // 10)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warmup, 0.5 * (1 + math.cos(math.pi * min(s, total) / total)))
    )
    print(f"{sum(p.numel() for p in model.parameters())} parameters, {total} steps", flush=True)
    t0, step, history = time.time(), 0, []
    model.train()
    for epoch in range(args.epochs):
        for ids, mask, labels in batches(*data["train"], tok, args.batch, rng):
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            if step % 100 == 0:
                print(f"step {step}/{total} loss {loss.item():.4f} {time.time() - t0:.0f}s", flush=True)
        acc, em = evaluate(model, tok, *data["valid"])
        history.append({"epoch": epoch + 1, "valid_token_accuracy": acc, "valid_exact_match": em})
        print(f"epoch {epoch + 1}: valid token accuracy {acc:.4f}, exact match {em:.4f}", flush=True)
    model.eval()
    test_acc, test_em = evaluate(model, tok, *data["test"])
    print(f"test: token accuracy {test_acc:.4f}, exact match {test_em:.4f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    model.to(torch.float32).save_pretrained(args.out, safe_serialization=True)
    tok.save_pretrained(args.out)
    report = {
        "history": history,
        "test_token_accuracy": test_acc,
        "test_exact_match": test_em,
        "steps": step,
        "train_seconds": round(time.time() - t0),
        "threads": args.threads,
        "seed": args.seed,
    }
    (args.out / "training.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"saved to {args.out}", flush=True)


if __name__ == "__main__":
    main()
