"""Run corpus statistics: chunks of lines → padded batches → one recorded pass each → summed statistics.

The input is cut into chunks of ``chunk_size`` consecutive lines. Each chunk is processed independently
(lines parsed, tokenised, sorted by length, batched, analysed, accumulated) into a state of sums that is
written to ``<out>/checkpoint/chunk_NNNNNN.npz`` as soon as it is done, so an interrupted run resumes with
the chunks still missing. The final statistics merge the chunk states in chunk order, so the in-process and
the Ray engines (same chunks, same batches) give the same numbers.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.errors import NormvizError
from .chunks import process_chunk, state_from_bytes, state_to_bytes
from .reader import file_digest, read_lines
from .stats import STATISTICS, merge

FORMAT_VERSION = 3  # 2: the 2021 mixing ratio (mixing_share_* for the earlier one); 3: chunk files named by a hash
# of the job's identity, a lock on the output directory


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
        return {
            "version": FORMAT_VERSION,
            "model": self.model,
            "source": lm_source,
            "revision": lm_revision,
            "input_sha256": digest,
            "stats": list(self.stats),
            "batch_size": self.batch_size,
            "chunk_size": self.chunk_size,
            "max_tokens": self.max_tokens,
            "limit": self.limit,
            "dtype": self.dtype,
        }


def validate_job(job: CorpusJob) -> None:
    unknown = [s for s in job.stats if s not in STATISTICS]
    if unknown:
        raise NormvizError(f"Unknown statistic(s) {', '.join(unknown)}; choose from {', '.join(STATISTICS)}.")
    if not job.stats:
        raise NormvizError(f"No statistic chosen; choose from {', '.join(STATISTICS)}.")
    for name in ("batch_size", "chunk_size", "workers"):
        if getattr(job, name) < 1:
            raise NormvizError(f"--{name.replace('_', '-')} must be at least 1.")
    if job.max_tokens is not None and job.max_tokens < 2:
        raise NormvizError(
            f"--max-tokens must be at least 2 (a sequence needs two tokens to mix), got {job.max_tokens}."
        )
    if job.limit is not None and job.limit < 1:
        raise NormvizError(f"--limit must be at least 1, got {job.limit}.")
    out = Path(job.out)
    if out.exists() and not out.is_dir():
        raise NormvizError(f"--out {job.out!r} is a file; pass a directory (it is created if missing).")
    if job.engine not in ("local", "ray"):
        raise NormvizError(f"Unknown engine {job.engine!r}; use 'local' or 'ray'.")
    if job.fmt not in ("parquet", "csv"):
        raise NormvizError(f"Unknown format {job.fmt!r}; use 'parquet' or 'csv'.")


# ---------------------------------------------------------------------------- exclusive use of --out
def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


class OutputLock:
    """An exclusive lock on ``<out>/.normviz.lock`` for the whole run (``flock``: released by the OS when the
    process dies, so a killed run never leaves a stale lock). A second run on the same ``--out`` is refused
    with a message naming the run that holds it."""

    NAME = ".normviz.lock"

    def __init__(self, out: Path, about: dict):
        self.path = out / self.NAME
        self.about = about
        self.fd: int | None = None

    def __enter__(self) -> "OutputLock":
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no lock, say so
            _warn("no file locking on this platform; do not start two runs on the same --out")
            return self
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            other = {}
            for _ in range(20):  # the holder writes who it is just after taking the lock: give it a moment
                try:
                    other = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "{}")
                except ValueError:
                    other = {}
                if other:
                    break
                time.sleep(0.05)
            os.close(fd)
            who = (
                ", ".join(f"{k} {other[k]}" for k in ("pid", "host", "started", "input") if k in other)
                or "details unknown"
            )
            raise NormvizError(
                f"{self.path.parent} is in use by another normviz corpus run ({who}). Wait for it to "
                "finish, or use another --out."
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(self.about).encode(), 0)
        self.fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- checkpoints
class Checkpoints:
    """``<out>/checkpoint/``: ``manifest.json`` (the job's identity) and one ``chunk_NNNNNN_<tag>.npz`` per
    chunk, ``tag`` a hash of the identity (model, input's SHA-256, options): a chunk file is only ever reused
    by a run of the same input and options. Both are written atomically (temporary file, then rename)."""

    def __init__(self, out: Path, identity: dict, fresh: bool = False):
        self.dir = out / "checkpoint"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.tag = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
        manifest = self.dir / "manifest.json"
        old = None
        if manifest.exists() and not fresh:
            try:
                old = json.loads(manifest.read_text())
            except (ValueError, OSError) as exc:
                _warn(f"{manifest} is unreadable ({type(exc).__name__}); starting afresh")
                old = None
        if old is not None:
            if old != identity:
                diff = ", ".join(f"{k}: {old.get(k)!r} → {v!r}" for k, v in identity.items() if old.get(k) != v)
                raise NormvizError(
                    f"{out} holds checkpoints of a different run ({diff}). Use another --out directory, or "
                    "--fresh to discard them."
                )
        else:
            for p in self.dir.glob("chunk_*.npz"):
                p.unlink()
            _atomic_write(manifest, json.dumps(identity, indent=1).encode())

    def path(self, k: int) -> Path:
        return self.dir / f"chunk_{k:06d}_{self.tag}.npz"

    def done(self) -> set[int]:
        out = set()
        for p in self.dir.glob(f"chunk_*_{self.tag}.npz"):
            try:
                out.add(int(p.stem.split("_")[1]))
            except (IndexError, ValueError):
                continue
        return out

    def write(self, k: int, data: bytes) -> None:
        _atomic_write(self.path(k), data)

    def read(self, k: int) -> tuple[dict, dict]:
        return state_from_bytes(self.path(k).read_bytes())

    def check(self, k: int) -> str | None:
        """Why chunk ``k``'s file cannot be used (unreadable, truncated, another chunk's), or None."""
        try:
            _state, meta = self.read(k)
        except Exception as exc:  # a torn or altered file: zip, npz or JSON errors of every kind
            return f"{type(exc).__name__}: {str(exc)[:120]}"
        if meta.get("chunk") != k:
            return f"it holds chunk {meta.get('chunk')!r}"
        return None


# ---------------------------------------------------------------------------- the run
@dataclass
class CorpusResult:
    tables: dict
    summary: dict
    files: dict[str, str]
    bad_lines: list[list]


def load_model(job: CorpusJob, progress_msg: Callable[[str], None] | None = None):
    from ..models import load

    return load(
        job.model,
        device=None if job.device_map else job.device,
        dtype=job.dtype,
        device_map=job.device_map,
        progress=progress_msg,
    )


def run_corpus(
    job: CorpusJob,
    lm=None,
    progress: Callable[[int, int], None] | None = None,
    show_bar: bool = True,
    stop_after: int | None = None,
) -> CorpusResult | None:
    """Run ``job``; returns the tables and summary (also written under ``job.out``).

    ``progress(done_lines, total_lines)`` is called after each batch (for UIs); ``show_bar`` draws a tqdm bar
    on stderr. ``stop_after``: process at most this many new chunks and return None (tests use it to
    simulate an interruption).
    """

    validate_job(job)
    lines = read_lines(job.input, job.limit)
    if not lines:
        raise NormvizError(f"{job.input} has no lines to analyse.")
    out = Path(job.out)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise NormvizError(f"--out {job.out!r} cannot be created: {exc.strerror or exc}.") from None
    about = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "input": str(job.input),
    }
    with OutputLock(out, about):  # before the model loads: a second run on this --out is refused at once
        return _run_locked(job, lines, out, lm, progress, show_bar, stop_after)


def _run_locked(job: CorpusJob, lines, out: Path, lm, progress, show_bar: bool, stop_after: int | None):
    from tqdm.auto import tqdm

    if lm is None and job.engine == "local":
        lm = load_model(job, lambda m: print(m, file=sys.stderr) if show_bar else None)
    if lm is not None:
        source, revision = lm.source, lm.revision
    else:
        from ..models.loading import resolve

        source, revision = resolve(job.model)
    ck = Checkpoints(out, job.identity(source, revision, file_digest(job.input)), fresh=job.fresh)
    chunks = [lines[i : i + job.chunk_size] for i in range(0, len(lines), job.chunk_size)]
    done = ck.done() & set(range(len(chunks)))
    for k in sorted(done):
        why = ck.check(k)
        if why is not None:
            _warn(f"checkpoint {ck.path(k)} is corrupted ({why}); recomputing chunk {k}")
            ck.path(k).unlink(missing_ok=True)
            done.discard(k)
    todo = [k for k in range(len(chunks)) if k not in done]
    if stop_after is not None:
        todo = todo[:stop_after]
    total = len(lines)
    already = sum(len(chunks[k]) for k in done)
    bar = tqdm(
        total=total, initial=already, unit="line", desc=f"corpus {job.model}", disable=not show_bar, file=sys.stderr
    )
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
    if not any(m["lines"] for m in metas):  # nothing analysed: no statistics, and the run must not look done
        bad = sorted(b for m in metas for b in m["bad"])
        path = Path(job.out) / "bad_lines.csv"
        pd.DataFrame({"line": [b[0] for b in bad], "reason": [b[1] for b in bad]}).to_csv(path, index=False)
        first = f"; e.g. line {bad[0][0]}: {bad[0][1]}" if bad else ""
        raise NormvizError(
            f"No line of {job.input} could be analysed ({len(bad)} skipped{first}). The reasons are in {path}."
        )
    merged = merge(states)
    L, H = metas[0]["n_layers"], metas[0]["n_heads"]
    tabs = tables(merged, L, H)
    seq_lines = [ln for m in metas for ln in m["lines"]]
    seq_tokens = [n for m in metas for n in m["n_tokens"]]
    order = np.argsort(seq_lines, kind="stable")
    tabs["sequences"] = pd.DataFrame(
        {"line": np.array(seq_lines, dtype=np.int64)[order], "n_tokens": np.array(seq_tokens, dtype=np.int64)[order]}
    )
    bad = sorted(b for m in metas for b in m["bad"])
    tabs["bad_lines"] = pd.DataFrame(
        {"line": [b[0] for b in bad], "reason": [b[1] for b in bad]}, columns=["line", "reason"]
    ).astype({"line": "int64"})
    summ = summary(merged, tabs)
    summ = {
        "model": job.model,
        "input": str(job.input),
        "engine": job.engine,
        "statistics_chosen": list(job.stats),
        "lines_read": sum(len(m["lines"]) + len(m["bad"]) for m in metas),
        "bad_lines": len(bad),
        "seconds_this_run": round(elapsed, 3),
        **summ,
    }
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
    _atomic_write(spath, json.dumps(summ, indent=1, ensure_ascii=False).encode())
    files["summary"] = str(spath)
    return CorpusResult(tables=tabs, summary=summ, files=files, bad_lines=bad)


__all__ = ["CorpusJob", "CorpusResult", "process_chunk", "run_corpus"]
