"""`python -m normviz corpus`: outputs, bad lines with line numbers, checkpoints and resume, device_map."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from normviz.cli import main
from normviz.core.errors import NormvizError
from normviz.corpus import CorpusJob, run_corpus

from ..helpers.corpus import assert_tables_equal, sample_lines


@pytest.fixture()
def corpus_file(tmp_path):
    good = [s for s in sample_lines(60) if len(s.split()) <= 20][:7]
    assert len(good) == 7
    raw = (
        b"\n".join(
            [
                good[0].encode(),
                b"",  # line 2: empty
                good[1].encode(),
                b"caf\xe9 au lait",  # line 4: Latin-1, not UTF-8
                (good[2] + "\t" + good[3]).encode(),  # line 5: a pair
                b"one\ttwo\tthree",  # line 6: two tabs
                " ".join(["word"] * 80).encode(),  # line 7: too long for --max-tokens 60
                good[4].encode(),
                good[5].encode(),
                good[6].encode(),
            ]
        )
        + b"\n"
    )
    path = tmp_path / "corpus.txt"
    path.write_bytes(raw)
    return path


def test_cli_writes_tables_summary_and_logs_bad_lines(tiny_bert_dir, corpus_file, tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(
        [
            "corpus",
            "--model",
            str(tiny_bert_dir),
            "--input",
            str(corpus_file),
            "--out",
            str(out),
            "--max-tokens",
            "60",
            "--chunk-size",
            "4",
            "--batch-size",
            "3",
            "--quiet",
        ]
    )
    assert rc == 0
    err = capsys.readouterr().err
    for line in (2, 4, 6, 7):
        assert f"skipped line {line}:" in err
    bad = pd.read_csv(out / "bad_lines.csv")
    assert bad["line"].tolist() == [2, 4, 6, 7]
    reasons = dict(zip(bad["line"], bad["reason"]))
    assert "empty" in reasons[2] and "UTF-8" in reasons[4] and "tab" in reasons[6] and "too long" in reasons[7]
    seqs = pd.read_parquet(out / "sequences.parquet")
    assert seqs["line"].tolist() == [1, 3, 5, 8, 9, 10]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["sequences"] == 6 and summary["bad_lines"] == 4 and summary["lines_read"] == 10
    assert summary["tokens"] == int(seqs["n_tokens"].sum())
    for name in ("head_stats", "layer_stats", "category_shares", "tokens"):
        df = pd.read_parquet(out / f"{name}.parquet")
        assert len(df) > 0
    hs = pd.read_parquet(out / "head_stats.parquet")
    assert len(hs) == 2 * 4 and {"fx_cv", "rho_alpha_fx", "mixing_norm"} <= set(hs.columns)
    ls = pd.read_parquet(out / "layer_stats.parquet")
    assert {"mixing_attn_res_ln", "ff_change_ff_res_ln"} <= set(ls.columns)
    # chunk files: index and a hash of the job's identity (input and options), so no other run reuses them
    assert re.fullmatch(r"chunk_000002_[0-9a-f]{16}\.npz", sorted((out / "checkpoint").glob("chunk_*.npz"))[-1].name)


def test_resume_after_interruption_gives_the_same_results(tiny_llama_dir, corpus_file, tmp_path):
    job = dict(
        model=str(tiny_llama_dir),
        input=str(corpus_file),
        chunk_size=3,
        batch_size=2,
        max_tokens=60,
        stats=("cv", "shares", "mixing", "ff_change"),
    )
    full = run_corpus(CorpusJob(out=str(tmp_path / "full"), **job), show_bar=False)
    out = tmp_path / "resumed"
    assert run_corpus(CorpusJob(out=str(out), **job), show_bar=False, stop_after=2) is None  # "interrupted"
    done = sorted((out / "checkpoint").glob("chunk_*.npz"))
    assert [p.name[:12] for p in done] == ["chunk_000000", "chunk_000001"]
    assert len({p.name[13:] for p in done}) == 1  # one job identity
    mtimes = {p.name: p.stat().st_mtime_ns for p in done}
    seen = []
    resumed = run_corpus(CorpusJob(out=str(out), **job), show_bar=False, progress=lambda d, t: seen.append((d, t)))
    assert seen[0] == (6, 10)  # started after the two finished chunks
    for p in done:
        assert p.stat().st_mtime_ns == mtimes[p.name]  # not recomputed
    # the finished chunks come from the interrupted run's passes, the rest from new ones: equal up to GEMM rounding
    # (not bit for bit: tests/helpers/maps.py PASS_TOL says why); a chunk lost, doubled or misplaced is O(1)
    assert_tables_equal(full.tables, resumed.tables, exact=False, rtol=1e-12, scaled_atol=1e-12)
    assert full.bad_lines == resumed.bad_lines


def test_checkpoints_of_another_run_are_refused(tiny_bert_dir, corpus_file, tmp_path):
    out = tmp_path / "o"
    run_corpus(CorpusJob(model=str(tiny_bert_dir), input=str(corpus_file), out=str(out), stats=("cv",)), show_bar=False)
    with pytest.raises(NormvizError, match="different run"):
        run_corpus(
            CorpusJob(model=str(tiny_bert_dir), input=str(corpus_file), out=str(out), stats=("cv", "mixing")),
            show_bar=False,
        )
    res = run_corpus(
        CorpusJob(
            model=str(tiny_bert_dir),
            input=str(corpus_file),
            out=str(out),
            stats=("cv", "mixing"),
            fresh=True,
            fmt="csv",
        ),
        show_bar=False,
    )
    assert (out / "layer_stats.csv").exists() and "mixing_attn_res" in res.tables["layer_stats"]


def test_missing_input_is_a_clear_error(tmp_path, capsys):
    rc = main(["corpus", "--model", "minilm", "--input", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "o")])
    assert rc == 2
    assert "not found" in capsys.readouterr().err


def test_device_map_auto_equals_plain_load(tiny_bert_dir, corpus_file, tmp_path):
    job = dict(model=str(tiny_bert_dir), input=str(corpus_file), max_tokens=60, stats=("cv", "shares", "mixing"))
    plain = run_corpus(CorpusJob(out=str(tmp_path / "a"), **job), show_bar=False)
    sharded = run_corpus(CorpusJob(out=str(tmp_path / "b"), device_map="auto", **job), show_bar=False)
    assert_tables_equal(plain.tables, sharded.tables, exact=False, rtol=1e-6)
