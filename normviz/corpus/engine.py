"""Run corpus statistics: chunks of lines → padded batches → one recorded pass each → summed statistics.

The input is cut into chunks of ``chunk_size`` consecutive lines. Each chunk is processed independently
(lines parsed, tokenised, sorted by length, batched, analysed, accumulated) into a state of sums that is
written to ``<out>/checkpoint/chunk_NNNNNN.npz`` as soon as it is done, so an interrupted run resumes with
the chunks still missing. The final statistics merge the chunk states in chunk order, so the in-process and
the Ray engines (same chunks, same batches) give the same numbers.
"""
from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import NormvizError
from .chunks import process_chunk, state_from_bytes, state_to_bytes
from .reader import file_digest, read_lines
from .stats import STATISTICS, merge

FORMAT_VERSION = 2  # 2: the 2021 mixing ratio (mixing_share_* for the earlier one)


@dataclass
class CorpusJob:
    """Everything that defines a run (and must match to resume from checkpoints)."""

    model: str
    input: str
    out: str
    stats: tuple[str, ...] = STATISTICS
    batch_size: int = 16
    chunk_size: int = 64
    max_tokens: int | None = None  # longer lines are skipped and logged (default: the model's window)
    limit: int | None = None  # read at most this many lines
    dtype: str = "float32"
    device: str | None = None
    device_map: str | None = None  # "auto": shard with accelerate
    engine: str = "local"  # "local" | "ray"
    workers: int = 1  # Ray: model replicas (actors)
    ray_address: str | None = None
    ray_threads: int | None = None  # torch threads per CPU worker (default: the driver's, bit-identical results)
    fmt: str = "parquet"  # "parquet" | "csv"
    fresh: bool = False  # ignore existing checkpoints
    extra: dict = field(default_factory=dict)

    def identity(self, lm_source: str, lm_revision: str, digest: str) -> dict:
        """What a checkpoint must agree on to be reused."""
        return {"version": FORMAT_VERSION, "model": self.model, "source": lm_source, "revision": lm_revision,
                "input_sha256": digest, "stats": list(self.stats), "batch_size": self.batch_size,
                "chunk_size": self.chunk_size, "max_tokens": self.max_tokens, "limit": self.limit,
                "dtype": self.dtype}


def validate_job(job: CorpusJob) -> None:
    unknown = [s for s in job.stats if s not in STATISTICS]
    if unknown:
        raise NormvizError(f"Unknown statistic(s) {', '.join(unknown)}; choose from {', '.join(STATISTICS)}.")
    if not job.stats:
        raise NormvizError(f"No statistic chosen; choose from {', '.join(STATISTICS)}.")
    for name in ("batch_size", "chunk_size", "workers"):
        if getattr(job, name) < 1:
            raise NormvizError(f"--{name.replace('_', '-')} must be at least 1.")
    if job.engine not in ("local", "ray"):
        raise NormvizError(f"Unknown engine {job.engine!r}; use 'local' or 'ray'.")
    if job.fmt not in ("parquet", "csv"):
        raise NormvizError(f"Unknown format {job.fmt!r}; use 'parquet' or 'csv'.")


# ---------------------------------------------------------------------------- checkpoints
class Checkpoints:
    """``<out>/checkpoint/``: ``manifest.json`` (the job's identity) and one ``chunk_NNNNNN.npz`` per chunk."""

    def __init__(self, out: Path, identity: dict, fresh: bool = False):
        self.dir = out / "checkpoint"
        self.dir.mkdir(parents=True, exist_ok=True)
        manifest = self.dir / "manifest.json"
        if manifest.exists() and not fresh:
            old = json.loads(manifest.read_text())
            if old != identity:
                diff = ", ".join(f"{k}: {old.get(k)!r} → {v!r}" for k, v in identity.items() if old.get(k) != v)
                raise NormvizError(
                    f"{out} holds checkpoints of a different run ({diff}). Use another --out directory, or "
                    "--fresh to discard them."
                )
        else:
            for p in self.dir.glob("chunk_*.npz"):
                p.unlink()
            manifest.write_text(json.dumps(identity, indent=1))

    def path(self, k: int) -> Path:
        return self.dir / f"chunk_{k:06d}.npz"

    def done(self) -> set[int]:
        return {int(p.stem.split("_")[1]) for p in self.dir.glob("chunk_*.npz")}

    def write(self, k: int, data: bytes) -> None:
        tmp = self.dir / f".chunk_{k:06d}.{os.getpid()}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, self.path(k))

    def read(self, k: int) -> tuple[dict, dict]:
        return state_from_bytes(self.path(k).read_bytes())


# ---------------------------------------------------------------------------- the run
@dataclass
class CorpusResult:
    tables: dict
    summary: dict
    files: dict[str, str]
    bad_lines: list[list]


def load_model(job: CorpusJob, progress_msg: Callable[[str], None] | None = None):
    from .. import load

    return load(job.model, device=None if job.device_map else job.device, dtype=job.dtype,
                device_map=job.device_map, progress=progress_msg)


def run_corpus(job: CorpusJob, lm=None, progress: Callable[[int, int], None] | None = None,
               show_bar: bool = True, stop_after: int | None = None) -> CorpusResult | None:
    """Run ``job``; returns the tables and summary (also written under ``job.out``).

    ``progress(done_lines, total_lines)`` is called after each batch (for UIs); ``show_bar`` draws a tqdm bar
    on stderr. ``stop_after``: process at most this many new chunks and return None (tests use it to
    simulate an interruption).
    """
    from tqdm.auto import tqdm

    validate_job(job)
    lines = read_lines(job.input, job.limit)
    if not lines:
        raise NormvizError(f"{job.input} has no lines to analyse.")
    if lm is None and job.engine == "local":
        lm = load_model(job, lambda m: print(m, file=sys.stderr) if show_bar else None)
    out = Path(job.out)
    out.mkdir(parents=True, exist_ok=True)
    if lm is not None:
        source, revision = lm.source, lm.revision
    else:
        from ..models.loading import resolve

        source, revision = resolve(job.model)
    ck = Checkpoints(out, job.identity(source, revision, file_digest(job.input)), fresh=job.fresh)
    chunks = [lines[i:i + job.chunk_size] for i in range(0, len(lines), job.chunk_size)]
    done = ck.done() & set(range(len(chunks)))
    todo = [k for k in range(len(chunks)) if k not in done]
    if stop_after is not None:
        todo = todo[:stop_after]
    total = len(lines)
    already = sum(len(chunks[k]) for k in done)
    bar = tqdm(total=total, initial=already, unit="line", desc=f"corpus {job.model}", disable=not show_bar,
               file=sys.stderr)
    counter = {"n": already}
    t0 = time.perf_counter()

    partial = {"n": 0}  # lines of the running chunk already shown

    def step(m: int) -> None:
        partial["n"] += m
        bar.update(m)
        if progress:
            progress(counter["n"] + partial["n"], total)

    def finished(k: int, data: bytes) -> None:
        ck.write(k, data)
        bar.update(len(chunks[k]) - partial["n"])
        counter["n"] += len(chunks[k])
        partial["n"] = 0
        if progress:
            progress(counter["n"], total)

    if progress:
        progress(already, total)
    if todo:
        if job.engine == "ray":
            from .ray_engine import run_ray

            run_ray(job, {k: chunks[k] for k in todo}, finished)
        else:
            for k in todo:
                state, meta = process_chunk(lm, chunks[k], job.stats, job.batch_size, job.max_tokens, on_batch=step)
                finished(k, state_to_bytes(state, {**meta, "chunk": k}))
    bar.close()
    elapsed = time.perf_counter() - t0
    if stop_after is not None and len(ck.done() & set(range(len(chunks)))) < len(chunks):
        return None
    return finalize(job, ck, len(chunks), lm, elapsed)


def finalize(job: CorpusJob, ck: Checkpoints, n_chunks: int, lm, elapsed: float) -> CorpusResult:
    import pandas as pd

    from .results import summary, tables

    states, metas = [], []
    for k in range(n_chunks):
        s, m = ck.read(k)
        states.append(s)
        metas.append(m)
    merged = merge(states)
    L, H = metas[0]["n_layers"], metas[0]["n_heads"]
    tabs = tables(merged, L, H)
    seq_lines = [ln for m in metas for ln in m["lines"]]
    seq_tokens = [n for m in metas for n in m["n_tokens"]]
    order = np.argsort(seq_lines, kind="stable")
    tabs["sequences"] = pd.DataFrame({"line": np.array(seq_lines, dtype=np.int64)[order],
                                      "n_tokens": np.array(seq_tokens, dtype=np.int64)[order]})
    bad = sorted(b for m in metas for b in m["bad"])
    tabs["bad_lines"] = pd.DataFrame({"line": [b[0] for b in bad], "reason": [b[1] for b in bad]},
                                     columns=["line", "reason"]).astype({"line": "int64"})
    summ = summary(merged, tabs)
    summ = {"model": job.model, "input": str(job.input), "engine": job.engine, "statistics_chosen": list(job.stats),
            "lines_read": sum(len(m["lines"]) + len(m["bad"]) for m in metas), "bad_lines": len(bad),
            "seconds_this_run": round(elapsed, 3), **summ}
    out = Path(job.out)
    files = {}
    for name, df in tabs.items():
        if name == "bad_lines":
            path = out / "bad_lines.csv"
            df.to_csv(path, index=False)
        elif job.fmt == "parquet":
            path = out / f"{name}.parquet"
            df.to_parquet(path, index=False)
        else:
            path = out / f"{name}.csv"
            df.to_csv(path, index=False)
        files[name] = str(path)
    spath = out / "summary.json"
    spath.write_text(json.dumps(summ, indent=1, ensure_ascii=False))
    files["summary"] = str(spath)
    return CorpusResult(tables=tabs, summary=summ, files=files, bad_lines=bad)


__all__ = ["CorpusJob", "CorpusResult", "process_chunk", "run_corpus"]
