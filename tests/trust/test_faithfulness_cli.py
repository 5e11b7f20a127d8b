"""Issue 42, ``normviz faithfulness``: "text 1/5" was its only progress and --help said nothing of its cost; run
again into the same --out it silently replaced the earlier run's scored texts (no resume, no lock); every 20
texts it bootstrapped everything so far (n² in all); --lines -1 dropped the last line, --max-tokens -5 ended in
"unexpected OverflowError", --maps bogus_key and --ig-steps 0 ran the whole corpus and exited 0."""

from __future__ import annotations

import csv
import fcntl
import pickle

import pytest

from normviz.cli import faithfulness as fcli
from normviz.trust import attributions, report

from ..helpers.cli import run as run_cli

LINES = [
    "the cat sat on the mat",
    "a dog ran in the park today",
    "we read the old book slowly",
    "the sun rose over the hills",
    "birds sang in the tall trees",
]
CHEAP = ["--head-texts", "0", "--no-gradients", "--no-erasure", "--dtype", "float64"]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return path


def _argv(model, corpus, out, *extra):
    return ["faithfulness", "--model", str(model), "--corpus", str(corpus), "--out", str(out), *extra]


def _rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(
    "extra, says",
    [
        (["--lines", "-1"], "--lines -1"),
        (["--lines", "0"], "--lines 0"),
        (["--max-tokens", "-5"], "--max-tokens must be at least 2"),
        (["--maps", "bogus_key"], "bogus_key"),
        (["--maps", "norm,bogus_key"], "bogus_key"),
        (["--ig-steps", "0"], "--ig-steps 0"),
        (["--head-texts", "-2"], "--head-texts -2"),
        (["--shards", "0"], "--shards 0"),
    ],
)
def test_argument_mistakes_are_refused_before_any_work(no_load, corpus, tmp_path, capsys, extra, says):
    assert run_cli(_argv("smollm2", corpus, tmp_path / "out", *extra)) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error:") and says in err, err
    assert not (tmp_path / "out").exists()


def test_help_says_what_it_costs(capsys):
    assert run_cli(["faithfulness", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Cost per text" in text and "8 min 10 s" in text and "--fresh" in text


def test_lines_keeps_the_first_n_lines(corpus):
    assert fcli.read_lines(str(corpus), None) == LINES
    assert fcli.read_lines(str(corpus), 4) == LINES[:4]


def test_progress_says_each_text_and_the_time_left(llama_lm_dir, corpus, tmp_path, capsys):
    assert run_cli(_argv(llama_lm_dir, corpus, tmp_path / "out", "--lines", "3", *CHEAP)) == 0
    err = capsys.readouterr().err
    for k in (1, 2, 3):
        assert f"text {k}/3 ({round(100 * k / 3)} %)" in err
    assert "left" in err and "done" in err
    assert fcli.progress_line(2, 4, 120.0, 2, 4) == "text 2/4 (50 %): 2 min 0 s so far, about 2 min 0 s left"


def test_an_interrupted_run_resumes_into_the_same_out(llama_lm_dir, corpus, tmp_path, capsys, monkeypatch):
    whole, out = tmp_path / "whole", tmp_path / "out"
    assert run_cli(_argv(llama_lm_dir, corpus, whole, *CHEAP)) == 0
    real, calls = attributions.explain_text, []

    def interrupted(session, *a, **k):
        calls.append(session.text)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(session, *a, **k)

    monkeypatch.setattr(report, "explain_text", interrupted)
    assert run_cli(_argv(llama_lm_dir, corpus, out, *CHEAP)) == 130
    with open(out / fcli.TEXTS_FILE, "rb") as fh:
        kept = []
        while True:
            try:
                kept.append(pickle.load(fh)[0])
            except EOFError:
                break
    assert kept == [0, 1, 2]
    calls.clear()
    capsys.readouterr()
    assert run_cli(_argv(llama_lm_dir, corpus, out, *CHEAP)) == 0
    assert calls == LINES[3:]  # only the lines not done
    assert "resuming" in capsys.readouterr().err
    assert _rows(out / "faithfulness.csv") == _rows(whole / "faithfulness.csv")
    assert _rows(out / "per_text.csv") == _rows(whole / "per_text.csv")


def test_a_run_with_other_arguments_never_replaces_the_earlier_results(llama_lm_dir, corpus, tmp_path, capsys):
    out = tmp_path / "out"
    assert run_cli(_argv(llama_lm_dir, corpus, out, "--lines", "3", *CHEAP)) == 0
    before = (out / "per_text.csv").read_bytes()
    capsys.readouterr()
    assert run_cli(_argv(llama_lm_dir, corpus, out, "--lines", "2", *CHEAP)) == 2
    err = capsys.readouterr().err
    assert "earlier run with other arguments" in err and "lines" in err and "--fresh" in err
    assert (out / "per_text.csv").read_bytes() == before
    assert run_cli(_argv(llama_lm_dir, corpus, out, "--lines", "2", "--fresh", *CHEAP)) == 0
    assert {r["text"] for r in _rows(out / "per_text.csv")} == {"0", "1"}


def test_a_second_run_into_the_same_out_is_refused_while_one_writes(no_load, corpus, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    with open(out / fcli.LOCK_FILE, "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert run_cli(_argv("smollm2", corpus, out)) == 2
    assert "Another faithfulness run is writing" in capsys.readouterr().err


def test_the_summary_is_bootstrapped_once_whatever_the_number_of_texts(llama_lm_dir, tmp_path, monkeypatch):
    """Not every 20 texts over everything so far: the summary's bootstrap runs at the end only (the same number
    of summaries for 2 lines as for 22)."""
    counts = {}
    real = report.Faithfulness.summary

    def counted(self):
        counts[len(self.texts)] = counts.get(len(self.texts), 0) + 1
        return real(self)

    monkeypatch.setattr(report.Faithfulness, "summary", counted)
    path = tmp_path / "c.txt"
    path.write_text("\n".join(f"{LINES[k % 5]} {k}" for k in range(22)), encoding="utf-8")
    assert run_cli(_argv(llama_lm_dir, path, tmp_path / "o", "--max-tokens", "6", *CHEAP)) == 0
    assert set(counts) == {22}
    n_22 = counts[22]
    counts.clear()
    assert run_cli(_argv(llama_lm_dir, path, tmp_path / "p", "--lines", "2", "--max-tokens", "6", *CHEAP)) == 0
    assert counts == {2: n_22}
