"""``python -m normviz faithfulness --model M --corpus F --out DIR``: every attribution scored against attention
knockout (and head ablation) over the lines of a text file.

Writes ``DIR/faithfulness.csv`` (key, score, mean, lo, hi, n: means over texts with 95 % bootstrap intervals),
``DIR/per_text.csv``, ``DIR/faithfulness.md`` (the table, the settings and the time) and ``DIR/faithfulness.html``
(bars with intervals). ``--engine ray`` shards the lines over Ray workers (one model each), as ``normviz
corpus`` does; the numbers are the same texts' numbers, merged in line order.

Each text's result is appended to ``DIR/texts.pkl`` as soon as it is scored (``DIR/run.json``: the model, the
corpus's lines and the settings), so an interrupted run resumes where it stopped when run again into the same
``--out`` with the same arguments (``--fresh``: start over); a run with other settings is refused rather than
mixed in, and a second run into the same folder while one is writing it is refused (``DIR/.lock``). The
summary (bootstrap intervals) is computed once, at the end. Every argument is checked before the model loads.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import pickle
import sys
import time
from pathlib import Path

from ..core.commands import subcommand
from ..core.errors import NormvizError

COST = (
    "Cost per text: one forward pass per token knocked out, L·H passes for head ablation (--head-texts limits "
    "it), --ig-steps backward passes for integrated gradients and the erasure curves' passes. Measured: "
    "smollm2, 5 lines at the defaults, 8 min 10 s on 2 CPU cores (about 1.6 min a text); minilm is ~20× "
    "faster. --head-texts 0, --no-gradients and --no-erasure make it cheaper."
)
RUN_FILE, TEXTS_FILE, LOCK_FILE = "run.json", "texts.pkl", ".lock"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = (p.description or "") + ". " + COST
    p.add_argument("--model", default=None, help="smollm2, minilm, a Hub id or a local directory")
    p.add_argument("--corpus", default=None, help="a text file, one text per line (blank lines skipped)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--lines", type=int, default=None, help="only the first N lines")
    p.add_argument(
        "--max-tokens",
        type=int,
        default=16,
        help="truncate each text to N tokens (default 16): the prediction is then the next token at the cut",
    )
    p.add_argument("--maps", nargs="*", default=None, metavar="MAP_KEY", help="map keys (default: all but flow)")
    p.add_argument(
        "--head-texts",
        type=int,
        default=None,
        help="head ablation for the first N texts only (default: every text; 0: none)",
    )
    p.add_argument("--no-gradients", action="store_true", help="skip input × gradient and integrated gradients")
    p.add_argument("--ig-steps", type=int, default=32, help="integrated-gradients midpoint steps (default 32)")
    p.add_argument("--no-erasure", action="store_true", help="skip the AOPC erasure scores")
    p.add_argument(
        "--layers",
        action="store_true",
        help="also score each per-layer map against knocking out each edge in that layer only "
        "(spearman_layers; L·n more passes a text)",
    )
    p.add_argument(
        "--foil-rule",
        default=None,
        choices=["runner-up"],
        help="score the logit difference to each text's runner-up candidate (default: the raw logit)",
    )
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--device", default=None, help="cpu, cuda or mps (default: best available)")
    p.add_argument("--engine", default="local", choices=["local", "ray"], help="local: this process; ray: shards")
    p.add_argument("--shards", type=int, default=2, help="ray: how many shards (default 2)")
    p.add_argument("--ray-address", default=None, help="ray: address of a running cluster (default: a local one)")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="start over: discard the results of an earlier run in --out instead of resuming it",
    )
    p.add_argument(
        "--circuits",
        nargs="*",
        default=None,
        metavar="NAME",
        help="instead of --model/--corpus: score every method against the known circuits of these "
        "benchmarks (none named: all shipped); writes circuits.csv, .md, .html",
    )
    p.add_argument("--resamples", type=int, default=1000, help="--circuits: bootstrap resamples (default 1000)")
    p.add_argument(
        "--edges",
        action="store_true",
        help="--circuits: also the edge faithfulness curves (EAP, EAP-IG, the exact graph's edges; keep the top-k "
        "edges, mean-ablate the rest) in circuits_edges.csv and a second table; Llama-style models only, others "
        "say why not. Slow: about 35 s more on planted_induction, ~25 min on smollm2 (2-core CPU)",
    )


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
    return lines[:limit] if limit is not None else lines


def check_arguments(args) -> None:
    """Every mistake visible without the model, refused on one line before any work."""
    from ..core.inputs import check_device, check_max_tokens, check_model_name, output_dir

    check_model_name(args.model)
    if args.lines is not None and args.lines < 1:
        raise NormvizError(f"--lines {args.lines}: give 1 or more (the first N non-blank lines).")
    check_max_tokens(args.max_tokens)
    if args.ig_steps < 1:
        raise NormvizError(
            f"--ig-steps {args.ig_steps}: integrated gradients needs 1 step or more (default 32); "
            "--no-gradients skips them."
        )
    if args.head_texts is not None and args.head_texts < 0:
        raise NormvizError(f"--head-texts {args.head_texts}: give 0 (no head ablation) or more.")
    if args.shards < 1:
        raise NormvizError(f"--shards {args.shards}: give 1 or more.")
    if args.engine == "local":
        check_device(args.device)
    if args.maps:
        from ..methods.keyspace import known, parse

        args.maps = [m.strip() for item in args.maps for m in item.split(",") if m.strip()]
        for key in args.maps:
            if not known(key):
                parse(key)  # an unknown key is refused by name, with the close ones
    output_dir(args.out)


def _fingerprint(args, lines: list[str]) -> dict:
    """What a run's results depend on: a resumed run must have the same."""
    digest = hashlib.sha256("\n".join(lines).encode("utf-8")).hexdigest()
    return {
        "model": args.model,
        "dtype": args.dtype,
        "lines": len(lines),
        "corpus_sha256": digest,
        "settings": _settings(args),
    }


@contextlib.contextmanager
def _locked(out: Path):
    """One run writes ``out`` at a time (an exclusive flock on out/.lock); a second is refused."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(out / LOCK_FILE, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NormvizError(
                f"Another faithfulness run is writing {str(out)!r} now: wait for it, or give another --out."
            ) from None
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def earlier_results(out: Path, fingerprint: dict, fresh: bool) -> dict[int, tuple]:
    """{line index: ("text", Text) or ("skipped", why)} of an earlier run into ``out`` with the same fingerprint
    (resumed); ``fresh``: none (its files are replaced). An earlier run with other settings is refused: its
    scored texts are never silently replaced."""
    run, texts = out / RUN_FILE, out / TEXTS_FILE
    if fresh:
        for f in (run, texts):
            f.unlink(missing_ok=True)
        return {}
    if not run.exists():
        if texts.exists() or (out / "per_text.csv").exists():
            raise NormvizError(
                f"{str(out)!r} holds the results of an earlier faithfulness run that cannot be "
                "resumed (made by an older normviz): give another --out, or --fresh to replace them."
            )
        return {}
    try:
        before = json.loads(run.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise NormvizError(f"{str(run)!r} does not read: give another --out, or --fresh to start over.") from None
    if before != json.loads(json.dumps(fingerprint)):
        changed = sorted(
            k for k in set(before) | set(fingerprint) if before.get(k) != json.loads(json.dumps(fingerprint)).get(k)
        )
        raise NormvizError(
            f"{str(out)!r} holds an earlier run with other arguments ({', '.join(changed)} differ): "
            "run it with the same arguments to resume, give another --out, or --fresh to replace it."
        )
    done: dict[int, tuple] = {}
    if texts.exists():
        with open(texts, "rb") as fh:
            while True:
                try:
                    index, kind, value = pickle.load(fh)
                except EOFError:
                    break
                except Exception:  # noqa: BLE001  a record cut short by the interruption: the text is scored again
                    break
                done[int(index)] = (kind, value)
    return done


def _settings(args) -> dict:
    heads = True if args.head_texts is None else int(args.head_texts)
    return dict(
        keys=args.maps,
        max_tokens=args.max_tokens,
        heads=heads,
        gradients=not args.no_gradients,
        ig_steps=args.ig_steps,
        erase=not args.no_erasure,
        foil_rule=args.foil_rule,
        layers=getattr(args, "layers", False),
    )


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
    return Faithfulness(
        model=first.model, texts=texts, skipped=skipped, seconds=max(p.seconds for p in parts), settings=first.settings
    )


def run(args) -> int:
    if args.circuits is not None:
        from ._circuits import run_circuits

        return run_circuits(args)
    if not args.model or not args.corpus:
        raise NormvizError("faithfulness needs --model and --corpus (or --circuits [NAME …]).")
    check_arguments(args)
    lines = read_lines(args.corpus, args.lines)
    out = Path(args.out).expanduser()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NormvizError(f"Could not create {str(out)!r}: {exc.strerror or exc}.") from None
    with _locked(out):
        return _run(args, lines, out)


def _run(args, lines: list[str], out: Path) -> int:
    fingerprint = _fingerprint(args, lines)
    done = earlier_results(out, fingerprint, args.fresh)
    if done and args.engine == "ray":
        raise NormvizError(
            f"{str(out)!r} holds {len(done)} texts of an interrupted run: resume it with --engine "
            "local, or give --fresh to start over."
        )
    (out / RUN_FILE).write_text(json.dumps(fingerprint), encoding="utf-8")
    settings, start = _settings(args), time.perf_counter()
    if done:
        print(f"resuming {out}: {len(done)} of {len(lines)} lines done by an earlier run", file=sys.stderr)
    if args.engine == "ray":
        from ..corpus.ray_engine import ensure_ray

        ray = ensure_ray(args.ray_address, args.shards)
        size = -(-len(lines) // max(1, args.shards))
        offsets = list(range(0, len(lines), size))
        task = ray.remote(_shard)
        parts = ray.get(
            [task.remote(args.model, args.device, args.dtype, lines[o : o + size], o, settings) for o in offsets]
        )
        result = merge(parts, offsets)
    else:
        from ..models import load
        from ..trust.report import Faithfulness, faithfulness

        lm = load(args.model, device=args.device, dtype=args.dtype)
        todo = len(lines) - len(done)
        clock = {"t0": time.perf_counter(), "n": 0}

        def on_text(index, text, why):  # appended at once: an interruption loses at most the text running
            with open(out / TEXTS_FILE, "ab") as fh:
                pickle.dump((index, "text", text) if text is not None else (index, "skipped", why), fh)
            done[index] = ("text", text) if text is not None else ("skipped", why)
            clock["n"] += 1
            print(
                progress_line(
                    clock["n"], todo, time.perf_counter() - clock["t0"], len(lines) - todo + clock["n"], len(lines)
                ),
                file=sys.stderr,
                flush=True,
            )

        fresh = faithfulness(lm, lines, skip=set(done), on_text=on_text, **settings)
        order = sorted(done)
        result = Faithfulness(
            model=fresh.model,
            texts=[done[k][1] for k in order if done[k][0] == "text"],
            skipped=[(k, done[k][1]) for k in order if done[k][0] == "skipped"],
            seconds=fresh.seconds,
            settings=fresh.settings,
        )
    wall = time.perf_counter() - start
    write(result, out, args, wall, len(lines))
    print(
        f"wrote {out}: {len(result.texts)} texts scored, {len(result.skipped)} skipped, {wall:.0f} s", file=sys.stderr
    )
    return 0


def progress_line(k: int, todo: int, seconds: float, done: int, total: int) -> str:
    """ "text 3/5 (60 %): 2 min 10 s so far, about 1 min 27 s left" (the rate of this run's texts)."""
    left = seconds / k * (todo - k) if k else float("nan")
    return f"text {done}/{total} ({100 * done / total:.0f} %): {_duration(seconds)} so far" + (
        f", about {_duration(left)} left" if k < todo else ", done"
    )


def _duration(s: float) -> str:
    s = round(s)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


def write(result, out: Path, args, wall: float, n_lines: int) -> None:
    from ..viz.trust import score_bars

    result.to_csv(out / "faithfulness.csv")
    result.per_text_csv(out / "per_text.csv")
    note = [
        f"# Faithfulness of {result.model}",
        "",
        f"{len(result.texts)} of {n_lines} lines of {args.corpus} scored ({len(result.skipped)} skipped); "
        f"{wall:.0f} s wall ({args.engine}); settings {result.settings}.",
        "",
        "Scores are means over texts with 95 % bootstrap intervals (texts resampled). spearman / kendall: "
        "against attention-knockout deltas over the tokens before the predicted position; spearman_heads: "
        "against head-ablation deltas; comprehensiveness / sufficiency: AOPC over 10/30/50 % of the tokens "
        "replaced by the baseline token; gap: completeness gap.",
        "",
        result.table(),
        "",
    ]
    if result.skipped:
        note += ["Skipped lines:", ""] + [f"- line {k + 1}: {why}" for k, why in result.skipped] + [""]
    (out / "faithfulness.md").write_text("\n".join(note), encoding="utf-8")
    figs = []
    rows = result.summary()
    for score in ("spearman", "comprehensiveness", "sufficiency", "spearman_heads"):
        sel = sorted(
            (r for r in rows if r["score"] == score), key=lambda r: -(r["mean"] if r["mean"] == r["mean"] else -9)
        )
        if sel:
            figs.append(
                score_bars(
                    [r["key"] for r in sel],
                    [r["mean"] for r in sel],
                    [r["lo"] for r in sel],
                    [r["hi"] for r in sel],
                    title=f"{result.model}: {score}",
                    reference="attention",
                )
            )
    html = "".join(f.to_html(full_html=False, include_plotlyjs="cdn" if k == 0 else False) for k, f in enumerate(figs))
    (out / "faithfulness.html").write_text(f"<html><body>{html}</body></html>", encoding="utf-8")


subcommand("faithfulness", "score every attribution against knockout / head ablation over a corpus")(
    (add_arguments, run)
)
