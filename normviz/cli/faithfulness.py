"""``python -m normviz faithfulness --model M --corpus F --out DIR``: every attribution scored against attention
knockout (and head ablation) over the lines of a text file.

Writes ``DIR/faithfulness.csv`` (key, score, mean, lo, hi, n: means over texts with 95 % bootstrap intervals),
``DIR/per_text.csv``, ``DIR/faithfulness.md`` (the table, the settings and the time) and ``DIR/faithfulness.html``
(bars with intervals). ``--engine ray`` shards the lines over Ray workers (one model each), as ``normviz
corpus`` does; the numbers are the same texts' numbers, merged in line order.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..core.commands import subcommand
from ..core.errors import NormvizError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None, help="smollm2, minilm, a Hub id or a local directory")
    p.add_argument("--corpus", default=None, help="a text file, one text per line (blank lines skipped)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--lines", type=int, default=None, help="only the first N lines")
    p.add_argument("--max-tokens", type=int, default=16, help="truncate each text to N tokens (default 16): "
                                                             "the prediction is then the next token at the cut")
    p.add_argument("--maps", nargs="*", default=None, metavar="MAP_KEY", help="map keys (default: all but flow)")
    p.add_argument("--head-texts", type=int, default=None,
                   help="head ablation for the first N texts only (default: every text; 0: none)")
    p.add_argument("--no-gradients", action="store_true", help="skip input × gradient and integrated gradients")
    p.add_argument("--ig-steps", type=int, default=32, help="integrated-gradients midpoint steps (default 32)")
    p.add_argument("--no-erasure", action="store_true", help="skip the AOPC erasure scores")
    p.add_argument("--foil-rule", default=None, choices=["runner-up"],
                   help="score the logit difference to each text's runner-up candidate (default: the raw logit)")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: best available)")
    p.add_argument("--engine", default="local", choices=["local", "ray"], help="local: this process; ray: shards")
    p.add_argument("--shards", type=int, default=2, help="ray: how many shards (default 2)")
    p.add_argument("--ray-address", default=None, help="ray: address of a running cluster (default: a local one)")
    p.add_argument("--circuits", nargs="*", default=None, metavar="NAME",
                   help="instead of --model/--corpus: score every method against the known circuits of these "
                        "benchmarks (none named: all shipped); writes circuits.csv, .md, .html")
    p.add_argument("--resamples", type=int, default=1000, help="--circuits: bootstrap resamples (default 1000)")


def read_lines(path: str, limit: int | None) -> list[str]:
    try:
        lines = [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines()]
    except OSError as exc:
        raise NormvizError(f"Could not read the corpus {path!r}: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise NormvizError(f"{path!r} is not UTF-8 text: save it as UTF-8, one text per line.") from None
    lines = [line for line in lines if line]
    if not lines:
        raise NormvizError(f"{path!r} has no non-blank line to score.")
    return lines[:limit] if limit else lines


def _settings(args) -> dict:
    heads = True if args.head_texts is None else int(args.head_texts)
    return dict(keys=args.maps, max_tokens=args.max_tokens, heads=heads, gradients=not args.no_gradients,
                ig_steps=args.ig_steps, erase=not args.no_erasure, foil_rule=args.foil_rule)


def _shard(model, device, dtype, lines, offset, settings):
    from ..models import load
    from ..trust.report import faithfulness
    lm = load(model, device=device, dtype=dtype)
    heads = settings["heads"]
    if not isinstance(heads, bool):  # the first N lines of the whole corpus
        settings = {**settings, "heads": max(0, heads - offset)}
    return faithfulness(lm, lines, first_index=offset, **settings)


def merge(parts, offsets):
    from ..trust.report import Faithfulness
    first = parts[0]
    texts, skipped = [], []
    for part, offset in zip(parts, offsets):
        texts += part.texts
        skipped += [(offset + k, why) for k, why in part.skipped]
    return Faithfulness(model=first.model, texts=texts, skipped=skipped, seconds=max(p.seconds for p in parts),
                        settings=first.settings)


def run(args) -> int:
    if args.circuits is not None:
        from ._circuits import run_circuits
        return run_circuits(args)
    if not args.model or not args.corpus:
        raise NormvizError("faithfulness needs --model and --corpus (or --circuits [NAME …]).")
    lines = read_lines(args.corpus, args.lines)
    out = Path(args.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NormvizError(f"Could not create {str(out)!r}: {exc.strerror or exc}.") from None
    settings, start = _settings(args), time.perf_counter()
    if args.engine == "ray":
        from ..corpus.ray_engine import ensure_ray
        ray = ensure_ray(args.ray_address, args.shards)
        size = -(-len(lines) // max(1, args.shards))
        offsets = list(range(0, len(lines), size))
        task = ray.remote(_shard)
        parts = ray.get([task.remote(args.model, args.device, args.dtype, lines[o:o + size], o, settings)
                         for o in offsets])
        result = merge(parts, offsets)
    else:
        from ..models import load
        from ..trust.report import faithfulness
        lm = load(args.model, device=args.device, dtype=args.dtype)

        def progress(fraction, message):
            print(f"\r{message}", end="", file=sys.stderr, flush=True)
        def checkpoint(partial):  # the files so far, rewritten every 20 texts
            write(partial, out, args, time.perf_counter() - start, len(lines))
        result = faithfulness(lm, lines, progress=progress, checkpoint=checkpoint, **settings)
        print(file=sys.stderr)
    wall = time.perf_counter() - start
    write(result, out, args, wall, len(lines))
    print(f"wrote {out}: {len(result.texts)} texts scored, {len(result.skipped)} skipped, {wall:.0f} s",
          file=sys.stderr)
    return 0


def write(result, out: Path, args, wall: float, n_lines: int) -> None:
    from ..viz.trust import score_bars
    result.to_csv(out / "faithfulness.csv")
    result.per_text_csv(out / "per_text.csv")
    note = [f"# Faithfulness of {result.model}", "",
            f"{len(result.texts)} of {n_lines} lines of {args.corpus} scored ({len(result.skipped)} skipped); "
            f"{wall:.0f} s wall ({args.engine}); settings {result.settings}.", "",
            "Scores are means over texts with 95 % bootstrap intervals (texts resampled). spearman / kendall: "
            "against attention-knockout deltas over the tokens before the predicted position; spearman_heads: "
            "against head-ablation deltas; comprehensiveness / sufficiency: AOPC over 10/30/50 % of the tokens "
            "replaced by the baseline token; gap: completeness gap.", "", result.table(), ""]
    if result.skipped:
        note += ["Skipped lines:", ""] + [f"- line {k + 1}: {why}" for k, why in result.skipped] + [""]
    (out / "faithfulness.md").write_text("\n".join(note), encoding="utf-8")
    figs = []
    rows = result.summary()
    for score in ("spearman", "comprehensiveness", "sufficiency", "spearman_heads"):
        sel = sorted((r for r in rows if r["score"] == score), key=lambda r: -(r["mean"] if r["mean"] == r["mean"]
                                                                                 else -9))
        if sel:
            figs.append(score_bars([r["key"] for r in sel], [r["mean"] for r in sel], [r["lo"] for r in sel],
                                   [r["hi"] for r in sel], title=f"{result.model}: {score}", reference="attention"))
    html = "".join(f.to_html(full_html=False, include_plotlyjs="cdn" if k == 0 else False) for k, f in enumerate(figs))
    (out / "faithfulness.html").write_text(f"<html><body>{html}</body></html>", encoding="utf-8")


subcommand("faithfulness", "score every attribution against knockout / head ablation over a corpus")(
    (add_arguments, run))
