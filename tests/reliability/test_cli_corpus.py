"""Items 4–6: CLI mistakes are one line and exit 2 before the model loads; corpus runs never mix; bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import normviz
from normviz.core.errors import NormvizError
from normviz.corpus import CorpusJob, run_corpus

from ..helpers.cli import run
from .helpers import ROOT


def _no_load(*a, **k):
    raise AssertionError("the model was loaded before the mistake was found")


def run_cli(argv, capsys) -> tuple[int, str]:
    rc = run(argv)
    err = capsys.readouterr().err
    return rc, err


MISTAKES = [
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}/x.npz", "--device", "tpu9"], "device"),
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}/x.npz", "--max-tokens", "-5"], "at least 2"),
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}/x.npz", "--max-tokens", "0"], "at least 2"),
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}/x.npz", "--max-tokens", "1"], "at least 2"),
    (["export", "--model", "m" * 300, "--text", "hi", "--out", "{tmp}/x.npz"], "300 characters"),
    (["export", "--model", "minilm", "--text", "ab\udcffcd", "--out", "{tmp}/x.npz"], "UTF-8 (byte 2)"),
    (["export", "--model", "minilm", "--text", "\x01\x02\x7f", "--out", "{tmp}/x.npz"], "no visible character"),
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}"], "is a directory"),
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}/missing/x.npz"], "does not exist"),
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}/x.npz", "--maps", "nope"], "Unknown map key"),
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}/x.npz", "--option", "novalue"], "KEY=VALUE"),
    (["export", "--model", "minilm", "--text", "hi", "--out", "{tmp}/x.npz", "--max-tokens", "abc"], "invalid int"),
    (["export", "--model", "minilm"], "required"),
    (["corpus", "--model", "minilm", "--input", "{tmp}"], "is a directory"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/none.txt"], "not found"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/u16.txt", "--out", "{tmp}/o"], "UTF-16"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/u16nobom.txt", "--out", "{tmp}/o"], "NUL"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/cr.txt", "--out", "{tmp}/o"], "CR only"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/ok.txt", "--out", "{tmp}/ok.txt"], "is a file"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/ok.txt", "--out", "{tmp}/o", "--max-tokens", "1"], "at least 2"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/ok.txt", "--out", "{tmp}/o", "--batch-size", "0"], "at least 1"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/ok.txt", "--out", "{tmp}/o", "--device", "tpu9"], "device"),
    (["corpus", "--model", "minilm", "--input", "{tmp}/ok.txt", "--out", "{tmp}/o", "--limit", "0"], "at least 1"),
]


def _files(tmp: Path) -> None:
    (tmp / "ok.txt").write_text("The cat sat on the mat.\nA dog barked.\n")
    (tmp / "u16.txt").write_bytes("hello\nworld\n".encode("utf-16"))
    (tmp / "u16nobom.txt").write_bytes("hello\nworld\n".encode("utf-16-le"))
    (tmp / "cr.txt").write_bytes(b"one line\rtwo lines\rthree\r")


@pytest.mark.parametrize("argv,expect", MISTAKES)
def test_cli_mistake_is_one_line_exit_2_before_loading(argv, expect, tmp_path, capsys, monkeypatch):
    _files(tmp_path)
    monkeypatch.setattr(normviz, "load", _no_load)
    monkeypatch.setattr("normviz.corpus.engine.load_model", _no_load)
    rc, err = run_cli([a.replace("{tmp}", str(tmp_path)) for a in argv], capsys)
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and expect in lines[0], err
    assert "Traceback" not in err


@pytest.fixture(scope="module")
def minilm():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return normviz.load("minilm")


def test_export_prints_the_file_written(tmp_path, capsys, minilm, monkeypatch):
    monkeypatch.setattr(normviz, "load", lambda *a, **k: minilm)
    rc, err = run_cli(
        ["export", "--model", "minilm", "--text", "Hello there.", "--out", str(tmp_path / "maps"), "--maps", "norm"],
        capsys,
    )
    assert rc == 0 and f"wrote {tmp_path / 'maps.npz'}:" in err and (tmp_path / "maps.npz").is_file()


def test_unreadable_weights_are_a_message(tmp_path, capsys):
    src = Path(normviz.models.loading._minilm_dir())
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        if (src / name).exists():
            (tmp_path / name).write_bytes((src / name).read_bytes())
    (tmp_path / "pytorch_model.bin").write_bytes(b"not a pickle at all")
    rc, err = run_cli(["export", "--model", str(tmp_path), "--text", "hi", "--out", str(tmp_path / "x.npz")], capsys)
    assert rc == 2 and "Traceback" not in err and err.strip().splitlines()[-1].startswith("error: Could not load")


# --- corpus integrity ----------------------------------------------------------------------------------------


def _job(tmp: Path, name: str, lines: list[str], out: Path, **kw) -> CorpusJob:
    path = tmp / name
    path.write_text("\n".join(lines) + "\n")
    return CorpusJob(model="minilm", input=str(path), out=str(out), stats=("mixing",), batch_size=4, chunk_size=4, **kw)


LINES_A = [f"The cat number {i} sat on the mat." for i in range(10)]
LINES_B = [f"A dog called {i} barked at night again." for i in range(10)]


def test_two_runs_on_one_out_never_mix(tmp_path, minilm):
    out = tmp_path / "out"
    jobs = [_job(tmp_path, "a.txt", LINES_A, out), _job(tmp_path, "b.txt", LINES_B, out)]
    results, errors = {}, {}
    barrier = threading.Barrier(2)

    def go(i):
        barrier.wait()
        try:
            results[i] = run_corpus(jobs[i], lm=minilm, show_bar=False)
        except NormvizError as exc:
            errors[i] = str(exc)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) + len(errors) == 2
    for i, msg in errors.items():
        assert "in use by another normviz corpus run" in msg and "pid" in msg and "input" in msg
    for i, res in results.items():  # whichever finished: its own input alone
        alone = run_corpus(
            _job(tmp_path, f"alone{i}.txt", [LINES_A, LINES_B][i], tmp_path / f"alone{i}"), lm=minilm, show_bar=False
        )
        assert res.summary["tokens"] == alone.summary["tokens"]
        assert res.summary["statistics"] == alone.summary["statistics"]


def test_a_different_input_never_reuses_chunks(tmp_path, minilm):
    out = tmp_path / "out"
    run_corpus(_job(tmp_path, "a.txt", LINES_A, out), lm=minilm, show_bar=False)
    with pytest.raises(NormvizError, match="different run"):
        run_corpus(_job(tmp_path, "b.txt", LINES_B, out), lm=minilm, show_bar=False)
    res = run_corpus(_job(tmp_path, "b.txt", LINES_B, out, fresh=True), lm=minilm, show_bar=False)
    alone = run_corpus(_job(tmp_path, "b2.txt", LINES_B, tmp_path / "o2"), lm=minilm, show_bar=False)
    assert res.summary["statistics"] == alone.summary["statistics"]
    tags = {p.stem.split("_")[2] for p in (out / "checkpoint").glob("chunk_*.npz")}
    assert len(tags) == 1


def test_interrupted_run_resumes_to_identical_tables_and_corrupt_chunk_is_recomputed(tmp_path, minilm, capsys):
    full = run_corpus(_job(tmp_path, "a.txt", LINES_A, tmp_path / "full"), lm=minilm, show_bar=False)
    out = tmp_path / "resume"
    assert run_corpus(_job(tmp_path, "a.txt", LINES_A, out), lm=minilm, show_bar=False, stop_after=1) is None
    res = run_corpus(_job(tmp_path, "a.txt", LINES_A, out), lm=minilm, show_bar=False)
    for name, df in full.tables.items():
        assert df.equals(res.tables[name]), name
    chunk = sorted((out / "checkpoint").glob("chunk_*.npz"))[1]
    chunk.write_bytes(chunk.read_bytes()[:100])  # a torn write
    capsys.readouterr()
    res2 = run_corpus(_job(tmp_path, "a.txt", LINES_A, out), lm=minilm, show_bar=False)
    assert "is corrupted" in capsys.readouterr().err
    for name, df in full.tables.items():
        assert df.equals(res2.tables[name]), name


def test_a_run_that_analyses_nothing_fails(tmp_path, minilm, capsys, monkeypatch):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"\x01\x02\n\n\xff\xfe broken\n")
    with pytest.raises(NormvizError, match="No line"):
        run_corpus(
            CorpusJob(model="minilm", input=str(path), out=str(tmp_path / "o"), stats=("mixing",)),
            lm=minilm,
            show_bar=False,
        )
    monkeypatch.setattr("normviz.corpus.engine.load_model", lambda *a, **k: minilm)
    rc, err = run_cli(
        ["corpus", "--model", "minilm", "--input", str(path), "--out", str(tmp_path / "o2"), "--quiet"], capsys
    )
    assert rc == 2 and "No line" in err


# --- bounded memory ------------------------------------------------------------------------------------------

MEMORY_PROBE = r"""
import json, os, sys, time, psutil
import pandas  # imported before the clock starts: finalize's first import of it (~2 s without .pyc files on a
import normviz  # fresh CI venv) is a one-time cost of the process, not of refusing the line
from normviz.corpus import CorpusJob, run_corpus
lm = normviz.load("minilm")
proc = psutil.Process()
path = sys.argv[1]
with open(path, "wb") as fh:
    fh.write(b"word " * (50 * 2**20 // 5))
base = proc.memory_info().rss
t = time.process_time()  # CPU seconds: under load wall time measures the other processes too
res = None
try:
    res = run_corpus(CorpusJob(model="minilm", input=path, out=sys.argv[2], stats=("mixing",), max_tokens=128),
                     lm=lm, show_bar=False)
    outcome = "ran"
except normviz.core.errors.NormvizError as exc:
    outcome = str(exc)[:200]
t1 = time.process_time() - t
s = normviz.Session(lm, "word " * (10 * 2**20 // 5), max_tokens=128)  # 10 MB text through the library
t2 = time.process_time() - t - t1
print(json.dumps({"seconds": t1, "session_seconds": t2, "n_tokens": s.n_tokens, "outcome": outcome,
                  "extra_rss_mb": (proc.memory_info().rss - base) / 2**20,
                  "peak_mb": getattr(proc.memory_info(), "rss", 0) / 2**20}))
"""


def test_a_50_mb_line_is_refused_quickly_with_little_memory(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    proc = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(tmp_path / "big.txt"), str(tmp_path / "o")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    print(r)
    # CPU seconds of this process, not wall time: on the shared machine the wall time of the same work was
    # 2.7–3.3 s under load against ~1 s quiet (issue 22 item 7); the CPU time is what the refusal costs.
    assert "No line" in r["outcome"] and r["seconds"] < 2.0
    assert r["session_seconds"] < 2.0 and r["n_tokens"] == 128
    assert r["extra_rss_mb"] < 200
