"""``python -m normviz align --model M --src FILE --tgt FILE [--gold FILE] [--out DIR]``."""

from __future__ import annotations

import argparse
import sys

from ..core.commands import subcommand


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="an encoder–decoder: toy-mt, or a Marian/BART/T5 directory or Hub id")
    p.add_argument("--src", required=True, help="source sentences, one a line, words separated by spaces")
    p.add_argument("--tgt", required=True, help="their translations (teacher forced), line by line")
    p.add_argument("--gold", default=None, help="gold word alignment, line by line (Pharaoh i-j / i?j, or talp)")
    p.add_argument(
        "--gold-format",
        default="auto",
        choices=["auto", "pharaoh", "talp"],
        help="pharaoh: 0-based, i?j possible; talp: 1-based, ipj possible (auto: talp if a 'p' link)",
    )
    p.add_argument(
        "--subwords",
        default="auto",
        choices=["auto", "sentencepiece", "byte-bpe", "wordpiece", "bpe", "word"],
        help="how tokens mark word boundaries (default: told from the markers)",
    )
    p.add_argument("--out", default="align_out", help="output directory (created if missing)")
    p.add_argument("--max-tokens", type=int, default=None, help="skip (and log) longer lines (default: the window)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: best available)")
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch CPU threads (default: torch's choice; 1 is much faster for a small model on a busy machine)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from ..align.corpus import align_corpus, read_lines
    from ..align.formats import read_alignments
    from ..align.report import layer_table_text, write_outputs
    from ..core.errors import NormvizError
    from ..core.inputs import check_device, check_max_tokens, check_model_name, output_dir
    from ..models import load

    check_model_name(args.model)
    check_max_tokens(args.max_tokens)
    check_device(args.device)
    out = output_dir(args.out)
    if args.threads is not None:
        if args.threads < 1:
            raise NormvizError(f"--threads must be at least 1, got {args.threads}.")
        import torch

        torch.set_num_threads(args.threads)
    src, bad_src = read_lines(args.src, "--src")
    tgt, bad_tgt = read_lines(args.tgt, "--tgt")
    if not src:
        raise NormvizError(f"--src {args.src!r} is empty; pass one sentence a line.")
    gold, bad_gold, fmt = (None, [], "pharaoh")
    if args.gold:
        gold, bad_gold, fmt = read_alignments(args.gold, args.gold_format)
    known = {}
    for k, reason in bad_gold + bad_tgt + bad_src:
        known[k] = reason
    if len(src) != len(tgt):
        raise NormvizError(f"--src has {len(src)} lines and --tgt {len(tgt)}; they must pair line by line.")
    if gold is not None and len(gold) != len(src):
        raise NormvizError(f"--gold has {len(gold)} lines and --src {len(src)}; they must pair line by line.")
    lm = load(args.model, device=args.device, dtype=args.dtype, progress=lambda msg: print(msg, file=sys.stderr))
    res = align_corpus(
        lm,
        src,
        tgt,
        gold,
        gold_format=fmt,
        scheme=args.subwords,
        max_tokens=args.max_tokens,
        known_bad=known,
        show_bar=not args.quiet,
    )
    for k, reason in res.bad_lines:
        print(f"skipped line {k}: {reason}", file=sys.stderr)
    files = write_outputs(res, out)
    used = res.n_lines - len(res.bad_lines)
    print(
        f"{used} of {res.n_lines} lines aligned ({len(res.bad_lines)} skipped); wrote "
        + ", ".join(str(p) for p in files.values()),
        file=sys.stderr,
    )
    if res.has_gold:
        print(layer_table_text(res))
    else:
        print("no --gold: predicted alignments written, no AER", file=sys.stderr)
    return 0


subcommand("align", "word alignment from cross-attention weights vs norms, and its AER against a gold file")(
    (add_arguments, run)
)
