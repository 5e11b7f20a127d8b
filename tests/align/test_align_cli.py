"""``python -m normviz align`` on a few lines of the toy-mt test set with their gold alignment."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import normviz
from normviz.align import parse_line, sentence_words, special_tokens
from normviz.cli import main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "assets" / "toy_mt" / "data"
N = 8


@pytest.fixture(autouse=True)
def _keep_threads():
    import torch

    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)  # --threads 1 sets it process-wide


@pytest.fixture(scope="module")
def toy():
    return normviz.load("toy-mt")


def _lines(ext, n=N):
    return (DATA / f"test.{ext}").read_text(encoding="utf-8").splitlines()[:n]


def _write(tmp_path, src, tgt, gold):
    paths = []
    for name, lines in (("src", src), ("tgt", tgt), ("gold", gold)):
        p = tmp_path / f"x.{name}"
        p.write_bytes(b"".join((ln if isinstance(ln, bytes) else ln.encode("utf-8")) + b"\n" for ln in lines))
        paths.append(str(p))
    return paths


def _reference_links(toy, a, method, setting, layer):
    """Independent re-statement of the authors' procedure (rows rotated for AWI, subwords summed/averaged,
    eos row deleted, links to the eos column dropped) for one analysed sentence and one layer view."""
    M = a["cross_attention"][layer].mean(axis=0) if method == "weight" else a["cross_norm_layer"][layer]
    M = np.array(M, dtype=float)
    if setting == "AWI":
        M = M[list(range(1, len(M))) + [0]]
    w = sentence_words(a.src_tokens, a.tgt_tokens, special_tokens(toy.tokenizer))
    src_groups = w.src_groups + [[j] for j in w.src_null]
    cols = np.stack([M[:, g].sum(axis=1) for g in src_groups], axis=1)
    rows = np.stack([cols[g].mean(axis=0) for g in w.tgt_groups], axis=0)
    best = rows.argmax(axis=1)
    return {(int(s), t) for t, s in enumerate(best) if s < w.n_src}


def _aer(A, S, P):
    return 1 - (len(A & S) + len(A & P)) / (len(A) + len(S))


def test_align_writes_aer_tables_and_alignments(tmp_path, toy, capsys):
    src, tgt, gold = _lines("src"), _lines("tgt"), _lines("align")
    # bad lines: an empty target, undecodable bytes, a gold link outside its sentence
    src_in = src + ["the cat sees a dog", b"the \xff cat", "a dog sees the cat"]
    tgt_in = tgt + ["", "mao", "un inu vidas mao"]
    gold_in = gold + ["0-0", "0-0", "0-0 9-9"]
    s, t, g = _write(tmp_path, src_in, tgt_in, gold_in)
    out = tmp_path / "out"
    argv = [
        "align",
        "--model",
        "toy-mt",
        "--src",
        s,
        "--tgt",
        t,
        "--gold",
        g,
        "--out",
        str(out),
        "--quiet",
        "--threads",
        "1",
    ]
    assert main(argv) == 0
    err = capsys.readouterr()
    for k in (N + 1, N + 2, N + 3):
        assert f"skipped line {k}:" in err.err
    assert "empty target line" in err.err and "UTF-8" in err.err and "outside the sentence" in err.err
    assert "best" in err.out  # the per-layer table is printed
    L, H = toy.n_layers, toy.n_heads
    with open(out / "aer.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["method", "setting", "layer", "head", "aer"]
    assert len(rows) == 2 * 2 * L * (H + 1)
    assert {r["head"] for r in rows} == {str(h) for h in range(H)} | {"all"}
    assert (out / "aer_layers.txt").read_text().count("\n") == L + 3
    assert "bad_lines.tsv" in {p.name for p in out.iterdir()}
    # every predicted file keeps one line per input line (bad lines empty)
    pred = (out / "alignments" / "norm.AWI.layer0.headall.txt").read_text().splitlines()
    assert len(pred) == len(src_in) and pred[N:] == ["", "", ""]
    # the AER of each layer view equals an independent computation from the model's own maps
    golds = [parse_line(x) for x in gold]
    analyses = [
        normviz.Session(toy, a_, target=b_).get(["cross_attention", "cross_norm_layer"]) for a_, b_ in zip(src, tgt)
    ]
    for method in ("weight", "norm"):
        for setting in ("AWI", "AWO"):
            for layer in range(L):
                A = [_reference_links(toy, a_, method, setting, layer) for a_ in analyses]
                pred = (out / "alignments" / f"{method}.{setting}.layer{layer}.headall.txt").read_text().splitlines()
                assert [parse_line(x)[0] for x in pred[:N]] == A
                a_all = sum(len(x) for x in A)
                s_all = sum(len(gs) for gs, _ in golds)
                a_s = sum(len(x & gs) for x, (gs, _) in zip(A, golds))
                a_p = sum(len(x & gp) for x, (_, gp) in zip(A, golds))
                want = 1 - (a_s + a_p) / (a_all + s_all)
                got = [
                    float(r["aer"])
                    for r in rows
                    if (r["method"], r["setting"], r["layer"], r["head"]) == (method, setting, str(layer), "all")
                ]
                assert got == [pytest.approx(want, abs=1e-6)]


def test_toy_mt_aligns_its_words_at_the_predicting_row(tmp_path, capsys):
    """A robust property of the shipped model (README: its last layer's AWO AER is ~0 on the test set): some
    layer view aligns 40 held-out sentences well when read at the predicting row. Swapping the AWI/AWO rows or
    the merging of words would break it."""
    s, t, g = _write(tmp_path, _lines("src", 40), _lines("tgt", 40), _lines("align", 40))
    out = tmp_path / "o"
    assert (
        main(
            [
                "align",
                "--model",
                "toy-mt",
                "--src",
                s,
                "--tgt",
                t,
                "--gold",
                g,
                "--out",
                str(out),
                "--quiet",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    with open(out / "aer.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["head"] == "all"]
    for method in ("weight", "norm"):
        best = min(float(r["aer"]) for r in rows if r["method"] == method and r["setting"] == "AWO")
        assert best < 0.1, (method, best)


def test_align_without_gold_writes_alignments_only(tmp_path, capsys):
    s, t, g = _write(tmp_path, _lines("src", 2), _lines("tgt", 2), [])
    out = tmp_path / "o"
    assert (
        main(["align", "--model", "toy-mt", "--src", s, "--tgt", t, "--out", str(out), "--quiet", "--threads", "1"])
        == 0
    )
    assert not (out / "aer.csv").exists()
    assert len((out / "alignments" / "weight.AWO.layer0.head0.txt").read_text().splitlines()) == 2
    assert "no --gold" in capsys.readouterr().err


@pytest.mark.parametrize(
    "case, message",
    [
        ("lines", "must pair line by line"),
        ("gold_lines", "must pair line by line"),
        ("missing", "cannot read"),
        ("encoder", "not an encoder–decoder"),
    ],
)
def test_align_user_mistakes_exit_2_with_one_line(tmp_path, capsys, case, message):
    s, t, g = _write(
        tmp_path,
        _lines("src", 3),
        _lines("tgt", 3 if case != "lines" else 2),
        _lines("align", 3 if case != "gold_lines" else 1),
    )
    model = "minilm" if case == "encoder" else "toy-mt"
    if case == "missing":
        s = str(tmp_path / "nope.src")
    argv = [
        "align",
        "--model",
        model,
        "--src",
        s,
        "--tgt",
        t,
        "--out",
        str(tmp_path / "o"),
        "--quiet",
        "--threads",
        "1",
    ]
    if case != "encoder":
        argv += ["--gold", g]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and err[-1].startswith("error:") and message in err[-1]


# --- as careful as the corpus command (issue 22 item 5) ------------------------------------------------------
def _run(argv_files, out, gold=None):
    s, t = argv_files
    argv = ["align", "--model", "toy-mt", "--src", s, "--tgt", t, "--out", str(out), "--quiet", "--threads", "1"]
    return main(argv + (["--gold", gold] if gold else []))


def test_a_huge_gold_index_is_a_skipped_line_with_its_reason(tmp_path, capsys):
    gold = _lines("align", 3)
    gold[0] = "0-" + "9" * 4400 + " 1-1"  # int() refuses over 4,300 digits
    s, t, g = _write(tmp_path, _lines("src", 3), _lines("tgt", 3), gold)
    assert _run((s, t), tmp_path / "o", g) == 0
    err = capsys.readouterr().err
    assert "skipped line 1: gold alignment:" in err and "4,400 digits" in err and "unexpected" not in err
    assert len([ln for ln in err.splitlines() if "skipped line 1" in ln][0]) < 200  # the 4,400 digits are cut
    assert (tmp_path / "o" / "bad_lines.tsv").read_text().splitlines()[1].startswith("1\t")


@pytest.mark.parametrize(
    "encoding, named",
    [
        ("utf-16", "UTF-16 (little-endian)"),
        ("utf-16-le", "UTF-16 (little-endian)"),
        ("utf-16-be", "UTF-16 (big-endian)"),
        ("utf-32", "UTF-32"),
        ("utf-32-le", "UTF-32"),
    ],
)
def test_utf16_and_utf32_files_are_named_and_refused(tmp_path, capsys, encoding, named):
    s, t, g = _write(tmp_path, _lines("src", 2), _lines("tgt", 2), _lines("align", 2))
    for p in (s, t):  # equal line counts: read as UTF-8 they would pair up and align nonsense
        Path(p).write_bytes(Path(p).read_text(encoding="utf-8").encode(encoding))
    assert _run((s, t), tmp_path / "o", g) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: --src:") and named in err[-1]
    assert not (tmp_path / "o").exists()


def test_a_nul_byte_in_a_line_is_a_skipped_line(tmp_path, capsys):
    src = _lines("src", 3)
    src[1] = src[1].replace(" ", "\x00 ", 1)
    s, t, g = _write(tmp_path, src, _lines("tgt", 3), _lines("align", 3))
    assert _run((s, t), tmp_path / "o", g) == 0
    assert "skipped line 2: --src: holds a NUL byte" in capsys.readouterr().err


def test_a_rerun_into_the_same_out_leaves_no_stale_files(tmp_path, capsys):
    out = tmp_path / "o"
    src, tgt, gold = _lines("src", 3), _lines("tgt", 3), _lines("align", 3)
    s, t, g = _write(tmp_path, [src[0], "", src[2]], tgt, gold)  # line 2 skipped: bad_lines.tsv
    assert _run((s, t), out, g) == 0
    assert {"aer.csv", "aer_layers.txt", "aer_heads.txt", "bad_lines.tsv", "alignments"} <= {
        p.name for p in out.iterdir()
    }
    (out / "alignments" / "old.txt").write_text("stale")
    (out / "notes.txt").write_text("mine")  # not an output: left alone
    s, t, _ = _write(tmp_path, src[:2], tgt[:2], [])
    assert _run((s, t), out) == 0  # no --gold, no bad line
    assert sorted(p.name for p in out.iterdir()) == ["alignments", "notes.txt"]
    assert not (out / "alignments" / "old.txt").exists()
    assert len((out / "alignments" / "weight.AWO.layer0.head0.txt").read_text().splitlines()) == 2


def test_every_line_skipped_without_gold_is_an_error(tmp_path, capsys):
    s, t, _ = _write(tmp_path, ["", "   "], _lines("tgt", 2), [])
    assert _run((s, t), tmp_path / "o") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: none of the 2 lines could be aligned (line 1: empty source line; line 2:")
    assert not (tmp_path / "o" / "alignments").exists()


def test_a_utf8_byte_order_mark_in_the_gold_file_is_read_past(tmp_path, capsys):
    s, t, g = _write(tmp_path, _lines("src", 3), _lines("tgt", 3), _lines("align", 3))
    assert _run((s, t), tmp_path / "plain", g) == 0
    Path(g).write_bytes(b"\xef\xbb\xbf" + Path(g).read_bytes())
    Path(s).write_bytes(b"\xef\xbb\xbf" + Path(s).read_bytes())
    capsys.readouterr()
    assert _run((s, t), tmp_path / "bom", g) == 0
    assert "skipped line" not in capsys.readouterr().err
    assert not (tmp_path / "bom" / "bad_lines.tsv").exists()
    assert (tmp_path / "bom" / "aer.csv").read_text() == (tmp_path / "plain" / "aer.csv").read_text()
