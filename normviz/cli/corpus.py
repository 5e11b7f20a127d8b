"""``python -m normviz corpus --model M --input FILE [--out DIR]``: corpus statistics from the command line."""

from __future__ import annotations

import argparse
import json
import sys

from ..core.commands import subcommand
from ..corpus.stats import STAT_TITLES, STATISTICS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, help="minilm, smollm2, a Hugging Face Hub id or a local model directory")
    p.add_argument(
        "--input", required=True, help="text file: one sentence per line, or two sentences separated by a tab (a pair)"
    )
    p.add_argument("--out", default="corpus_out", help="output directory (tables, summary.json, checkpoints)")
    p.add_argument(
        "--stats",
        nargs="*",
        default=None,
        help="statistics to compute (default: all): " + "; ".join(f"{k} = {v}" for k, v in STAT_TITLES.items()),
    )
    p.add_argument("--batch-size", type=int, default=16, help="sentences per forward pass (default 16)")
    p.add_argument("--chunk-size", type=int, default=64, help="lines per checkpointed chunk (default 64)")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        help="skip (and log) lines longer than this many tokens (default: the model's window)",
    )
    p.add_argument("--limit", type=int, default=None, help="read at most this many lines")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: best available)")
    p.add_argument(
        "--device-map",
        default=None,
        metavar="auto",
        help="shard a model too large for one GPU over the GPUs (and CPU) with accelerate: 'auto'",
    )
    p.add_argument(
        "--engine",
        default="local",
        choices=["local", "ray"],
        help="local: this process; ray: Ray Data, one model per worker (GPU workers when present)",
    )
    p.add_argument("--workers", type=int, default=1, help="Ray: number of model replicas (default 1)")
    p.add_argument("--ray-address", default=None, help="Ray: address of a running cluster (default: start a local one)")
    p.add_argument(
        "--ray-threads",
        type=int,
        default=None,
        help="Ray: torch threads per CPU worker (default: as many as this process, which makes the "
        "results equal to --engine local, usually bit for bit; cores/workers is faster)",
    )
    p.add_argument("--format", dest="fmt", default="parquet", choices=["parquet", "csv"], help="table format")
    p.add_argument("--fresh", action="store_true", help="discard checkpoints in --out instead of resuming")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args) -> int:
    from ..core.errors import NormvizError
    from ..core.inputs import check_device, check_max_tokens, check_model_name, output_dir
    from ..corpus.engine import CorpusJob, run_corpus

    check_model_name(args.model)
    check_max_tokens(args.max_tokens)
    if args.limit is not None and args.limit < 1:
        raise NormvizError(f"--limit must be at least 1, got {args.limit}.")
    if args.device_map is None:
        check_device(args.device)
    output_dir(args.out)
    stats = STATISTICS
    if args.stats:
        stats = tuple(s for item in args.stats for s in item.split(",") if s.strip())
    if args.device_map and args.engine == "ray":
        from ..core.errors import NormvizError

        raise NormvizError("--device-map shards one model over this machine's GPUs; use it with --engine local.")
    job = CorpusJob(
        model=args.model,
        input=args.input,
        out=args.out,
        stats=tuple(stats),
        batch_size=args.batch_size,
        chunk_size=args.chunk_size,
        max_tokens=args.max_tokens,
        limit=args.limit,
        dtype=args.dtype,
        device=args.device,
        device_map=args.device_map,
        engine=args.engine,
        workers=args.workers,
        ray_address=args.ray_address,
        ray_threads=args.ray_threads,
        fmt=args.fmt,
        fresh=args.fresh,
    )
    res = run_corpus(job, show_bar=not args.quiet)
    for line, reason in res.bad_lines:
        print(f"skipped line {line}: {reason}", file=sys.stderr)
    s = res.summary
    if not s["sequences"]:  # pragma: no cover - run_corpus raises first
        print("error: no line could be analysed", file=sys.stderr)
        return 2
    print(
        f"{s['sequences']} sequences, {s['tokens']} tokens, {s['bad_lines']} bad lines; "
        f"wrote {', '.join(res.files.values())}",
        file=sys.stderr,
    )
    print(json.dumps(s["statistics"], indent=1, ensure_ascii=False))
    return 0


subcommand("corpus", "statistics over a text file (weights vs norms, mixing ratios, FF change)")((add_arguments, run))
