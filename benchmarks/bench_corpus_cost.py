"""Cost of a corpus statistic relative to the plain forward passes of the same batches.

    python benchmarks/bench_corpus_cost.py [--model minilm] [--n 48] [--stats ff_change] [--batch-size 8]

(a) the forward passes alone: the first N lines of the bundled sample, tokenised, sorted by length and
batched exactly as the corpus engine does, each batch run once through the model (attentions on, as the
recording pass); (b) the corpus engine on the same lines with the chosen statistics (model already loaded,
no checkpoint reuse). Reports (b)/(a).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import normviz  # noqa: E402
from normviz.core.tokens import encode, pad_batch  # noqa: E402
from normviz.corpus import CorpusJob, run_corpus  # noqa: E402

SAMPLE = ROOT / "assets" / "corpus" / "us_founding_documents.txt"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="minilm")
    p.add_argument("--n", type=int, default=48)
    p.add_argument("--stats", nargs="+", default=["ff_change"])
    p.add_argument("--batch-size", type=int, default=8)
    args = p.parse_args(argv)
    lm = normviz.load(args.model)
    lines = [ln for ln in SAMPLE.read_text(encoding="utf-8").splitlines() if ln.strip()][: args.n]
    encs = sorted(
        (encode(lm.tokenizer, ln, max_length=lm.max_length, warn=False) for ln in lines), key=lambda e: -len(e.ids)
    )
    batches = [encs[i : i + args.batch_size] for i in range(0, len(encs), args.batch_size)]

    def forward_only():
        with torch.no_grad():
            for b in batches:
                ids, mask = pad_batch(b)
                lm.model(input_ids=ids, attention_mask=mask, output_attentions=True)

    forward_only()  # warm-up
    t0 = time.perf_counter()
    forward_only()
    t_fwd = time.perf_counter() - t0
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.txt"
        src.write_text("\n".join(lines) + "\n", encoding="utf-8")
        job = CorpusJob(
            model=args.model,
            input=str(src),
            out=str(Path(tmp) / "out"),
            stats=tuple(args.stats),
            batch_size=args.batch_size,
        )
        t0 = time.perf_counter()
        run_corpus(job, lm=lm, show_bar=False)
        t_stats = time.perf_counter() - t0
    n_tok = sum(len(e.ids) for e in encs)
    print(
        f"{args.model}: {len(lines)} lines, {n_tok} tokens, batch {args.batch_size}: forward passes {t_fwd:.2f} s; "
        f"corpus --stats {' '.join(args.stats)} {t_stats:.2f} s = {t_stats / t_fwd:.1f}× the forward passes"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
