"""AER, alignment-file readers, subword grouping and word scores on hand-worked examples."""

import numpy as np
import pytest

import normviz
from normviz.align import (
    AerCounts,
    aer,
    best_source,
    detect_scheme,
    format_pharaoh,
    links,
    parse_line,
    read_alignments,
    sentence_alignments,
    sentence_words,
    word_groups,
    word_scores,
)
from normviz.align.formats import AlignmentFormatError


# --- AER -------------------------------------------------------------------------------------------------
def test_aer_perfect_and_disjoint():
    s = {(0, 0), (1, 1)}
    assert aer(s, s) == 0.0
    assert aer({(0, 1), (1, 0)}, s) == 1.0


def test_aer_hand_worked_sure_possible():
    # A = {00, 12, 21}, S = {00, 11}, P = S ∪ {12}: |A∩S| = 1, |A∩P| = 2, |A| + |S| = 5 -> 1 - 3/5
    A, S, P = {(0, 0), (1, 2), (2, 1)}, {(0, 0), (1, 1)}, {(0, 0), (1, 1), (1, 2)}
    assert aer(A, S, P) == pytest.approx(0.4)
    # P without the sure links is read as P ∪ S
    assert aer(A, S, {(1, 2)}) == pytest.approx(0.4)
    # possible=None: P = S -> 1 - 2/5
    assert aer(A, S) == pytest.approx(0.6)
    assert normviz.aer(A, S, P) == aer(A, S, P)


def test_aer_empty_alignments():
    assert aer(set(), set()) == 0.0  # nothing to find, nothing predicted
    assert aer(set(), {(0, 0)}) == 1.0  # nothing predicted
    assert aer({(0, 0)}, set(), {(0, 0)}) == 0.0  # only possible gold: 1 - |A∩P| / (|A| + |S|) = 1 - 1/1
    assert aer({(0, 0), (1, 1)}, set(), {(0, 0)}) == 0.5
    assert aer({(0, 0)}, set()) == 1.0


def test_corpus_counts_sum_before_the_ratio():
    c = AerCounts()
    c.add({(0, 0)}, {(0, 0)})  # 0 % alone
    c.add({(0, 1), (1, 0), (2, 2)}, {(0, 0), (1, 1), (2, 2)})  # 1 - 2/6
    # by hand: |A| = 4, |S| = 4, |A∩S| = 2, |A∩P| = 2 -> 1 - 4/8
    assert (c.a, c.s, c.a_s, c.a_p) == (4, 4, 2, 2)
    assert c.aer == pytest.approx(0.5)
    assert c.precision == pytest.approx(0.5) and c.recall == pytest.approx(0.5)


# --- formats -------------------------------------------------------------------------------------------
def test_pharaoh_sure_and_possible():
    sure, possible = parse_line("0-0 1?2 3-4-P 5-5-S 2-1")
    assert sure == {(0, 0), (5, 5), (2, 1)}
    assert possible == sure | {(1, 2), (3, 4)}
    assert parse_line("") == (set(), set())


def test_talp_is_one_based_with_p_for_possible():
    sure, possible = parse_line("1-1 2p3 3-2", "talp")
    assert sure == {(0, 0), (2, 1)} and possible == sure | {(1, 2)}
    with pytest.raises(AlignmentFormatError):
        parse_line("0-1", "talp")


@pytest.mark.parametrize("bad", ["1-", "a-b", "1:2", "1-2-X", "1?2-P"])
def test_bad_links_are_refused(bad):
    with pytest.raises(AlignmentFormatError):
        parse_line(bad)


def test_read_alignments_reports_bad_lines(tmp_path):
    f = tmp_path / "gold.txt"
    f.write_text("0-0 1-1\n\n0-0 x\n1p2\n", encoding="utf-8")
    entries, bad, fmt = read_alignments(f)
    assert fmt == "talp"  # a 'p' link
    assert [k for k, _ in bad] == [1, 3]  # talp is 1-based: index 0 on line 1 is refused
    assert entries[0] is None and entries[1] == (set(), set()) and entries[2] is None
    assert entries[3] == (set(), {(0, 1)})
    entries, bad, fmt = read_alignments(f, "pharaoh")
    assert fmt == "pharaoh" and entries[0][0] == {(0, 0), (1, 1)} and entries[3] == (set(), {(1, 2)})


def test_format_pharaoh_roundtrip():
    links_ = {(2, 0), (0, 1), (1, 1)}
    assert format_pharaoh(links_) == "2-0 0-1 1-1"
    assert parse_line(format_pharaoh(links_))[0] == links_


# --- subword grouping ---------------------------------------------------------------------------------
def test_sentencepiece_groups():
    toks = ["▁the", "▁ca", "t", "s", "▁sat", "</s>"]
    assert detect_scheme(toks, {"</s>"}) == "sentencepiece"
    assert word_groups(toks, {"</s>"}) == [[0], [1, 2, 3], [4]]
    # a first piece without ▁ (no dummy prefix) still begins a word
    assert word_groups(["ca", "t", "▁sat"]) == [[0, 1], [2]]


def test_other_schemes():
    assert word_groups(["<s>", "The", "Ġca", "t", "</s>"], {"<s>", "</s>"}) == [[1], [2, 3]]
    assert word_groups(["the", "ca@@", "t@@", "s", "sat"]) == [[0], [1, 2, 3], [4]]
    assert word_groups(["[CLS]", "ca", "##t", "sat", "[SEP]"], {"[CLS]", "[SEP]"}) == [[1, 2], [3]]
    assert word_groups(["a", "b", "</s>"], {"</s>"}) == [[0], [1]]
    assert detect_scheme(["a", "b"]) == "word"


# --- word scores and hard alignment ---------------------------------------------------------------------
def _their_word_matrix(M, src_groups, tgt_groups, awi):
    """Independent re-statement of the authors' procedure: rows rotated for AWI, source subwords summed,
    target subwords averaged, the last (eos) row deleted; the source eos column kept."""
    M = np.array(M, dtype=float)
    if awi:
        M = M[list(range(1, len(M))) + [0]]
    src = src_groups + [[M.shape[1] - 1]]
    cols = np.stack([M[:, g].sum(axis=1) for g in src], axis=1)
    tgt = tgt_groups + [[M.shape[0] - 1]]
    rows = np.stack([cols[g].mean(axis=0) for g in tgt], axis=0)
    return rows[:-1]


@pytest.mark.parametrize("setting", ["AWI", "AWO"])
def test_word_scores_match_the_papers_procedure(setting):
    rng = np.random.default_rng(0)
    src = ["▁das", "▁Ha", "us", "▁ist", "▁gr", "o", "ß", "</s>"]
    tgt = ["<pad>", "▁the", "▁hou", "se", "▁is", "▁bi", "g"]  # decoder inputs: start token, then the target
    words = sentence_words(src, tgt, {"</s>", "<pad>"})
    assert words.src_groups == [[0], [1, 2], [3], [4, 5, 6]] and words.src_null == [7]
    assert words.tgt_groups == [[0], [1, 2], [3], [4, 5]]
    M = rng.random((len(tgt), len(src)))
    ours = word_scores(M, words, setting)
    # the authors' rows: AWO row k predicts target token k; with eos as the extra last target "word"
    theirs = _their_word_matrix(M, words.src_groups, words.tgt_groups, setting == "AWI")
    np.testing.assert_allclose(ours, theirs, rtol=1e-12)


def test_awi_uses_the_row_where_the_word_is_fed():
    src, tgt = ["a", "b", "</s>"], ["<pad>", "x", "y"]
    words = sentence_words(src, tgt, {"</s>", "<pad>"})
    M = np.zeros((3, 3))
    M[0, 0] = 1  # fed <pad>, predicts x: x -> a under AWO
    M[1, 1] = 1  # fed x, predicts y: x -> b under AWI, y -> b under AWO
    M[2, 2] = 1  # fed y, predicts eos: y -> eos under AWI (no link)
    assert links(best_source(M, words, "AWO")) == {(0, 0), (1, 1)}
    assert links(best_source(M, words, "AWI")) == {(1, 0)}


def test_sentence_alignments_views():
    L, H, m, n = 2, 3, 4, 5
    rng = np.random.default_rng(1)
    att = rng.random((L, H, m, n))
    norm = rng.random((L, H, m, n))
    arrays = {"cross_attention": att, "cross_norm": norm, "cross_norm_layer": rng.random((L, m, n))}
    words = sentence_words(["a", "b", "c", "d", "</s>"], ["<pad>", "x", "y", "z"], {"</s>", "<pad>"})
    out = sentence_alignments(arrays, words)
    assert set(out) == {(m_, s) for m_ in ("weight", "norm") for s in ("AWI", "AWO")}
    assert out["weight", "AWO"].shape == (L, H + 1, 3)
    np.testing.assert_array_equal(out["weight", "AWO"][1, H], best_source(att[1].mean(0), words, "AWO"))
    np.testing.assert_array_equal(out["norm", "AWI"][0, H], best_source(arrays["cross_norm_layer"][0], words, "AWI"))
    np.testing.assert_array_equal(out["norm", "AWI"][0, 2], best_source(norm[0, 2], words, "AWI"))
