"""Hard word alignments from cross-attention maps, as Kobayashi et al. 2020 §5 (their ``calculate_aer.py``).

A cross map M [m, n] has one row per decoder input token (``tgt_tokens``: the decoder start token, then the
target tokens) and one column per encoder input token (``src_tokens``). Row r is *fed* ``tgt_tokens[r]`` and
*predicts* ``tgt_tokens[r+1]`` (the last row predicts eos). Target token k (``tgt_tokens[1+k]``) therefore has

- **AWI** (target word as decoder input): row k+1, where it is fed;
- **AWO** (target word as predicted output): row k, where it is predicted.

Word scores: W[t, s] = mean over the rows of target word t of Σ over the columns of source word s of M —
summed over a source word's subwords, averaged over a target word's. Special source columns (eos) stay
candidates of their own; target word t is linked to ``argmax_s W[t, s]`` and gets no link when a special
column wins (the authors drop links to the source eos). Ties go to the first candidate (``np.argmax``).

Views: per head, ``cross_attention[l, h]`` (method ``weight``) and ``cross_norm[l, h]`` (``norm``); the layer
view (head ``all``) averages the weights over heads and takes ``cross_norm_layer[l]`` for norms (their
``attn.mean(0)`` and ``summed_afx``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..methods import keyspace
from .words import word_groups

SETTINGS = ("AWI", "AWO")
KEYS = ("cross_attention", "cross_norm", "cross_norm_layer")


@dataclass(frozen=True)
class SentenceWords:
    """Which columns make each source word and which target positions make each target word."""

    src_groups: list  # column indices of source word s
    src_null: list  # special columns (eos, language codes): candidates that give no link
    tgt_groups: list  # positions k (tgt_tokens[1 + k]) of target word t
    n_rows: int
    n_cols: int

    @property
    def n_src(self) -> int:
        return len(self.src_groups)

    @property
    def n_tgt(self) -> int:
        return len(self.tgt_groups)


def sentence_words(src_tokens, tgt_tokens, special=frozenset(), scheme: str = "auto") -> SentenceWords:
    src_tokens, tgt_tokens = list(src_tokens), list(tgt_tokens)
    src = word_groups(src_tokens, special, scheme)
    tgt = word_groups(tgt_tokens[1:], special, scheme)
    null = [j for j, t in enumerate(src_tokens) if t in special]
    return SentenceWords(src, null, tgt, len(tgt_tokens), len(src_tokens))


def _pool_matrices(words: SentenceWords, setting: str) -> tuple[np.ndarray, np.ndarray]:
    """R [T, m] (mean over a target word's rows) and G [n, S+K] (sum over a source word's columns; then one
    column per special token)."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be AWI or AWO, got {setting!r}")
    shift = 1 if setting == "AWI" else 0
    R = np.zeros((words.n_tgt, words.n_rows))
    for t, positions in enumerate(words.tgt_groups):
        rows = [k + shift for k in positions]
        R[t, rows] = 1.0 / len(rows)
    G = np.zeros((words.n_cols, words.n_src + len(words.src_null)))
    for s, cols in enumerate(words.src_groups):
        G[cols, s] = 1.0
    for k, col in enumerate(words.src_null):
        G[col, words.n_src + k] = 1.0
    return R, G


def word_scores(maps: np.ndarray, words: SentenceWords, setting: str) -> np.ndarray:
    """W [..., T, S+K] from token maps [..., m, n] (leading axes: layers, heads)."""
    maps = np.asarray(maps, dtype=np.float64)
    if maps.shape[-2:] != (words.n_rows, words.n_cols):
        raise ValueError(
            f"map shape {maps.shape[-2:]} does not match {words.n_rows} target x {words.n_cols} source tokens"
        )
    R, G = _pool_matrices(words, setting)
    return R @ maps @ G


def best_source(maps: np.ndarray, words: SentenceWords, setting: str) -> np.ndarray:
    """For every target word the source word it aligns to, −1 where a special column wins: int [..., T]."""
    best = np.argmax(word_scores(maps, words, setting), axis=-1)
    return np.where(best < words.n_src, best, -1)


def links(best: np.ndarray) -> set:
    """``{(source, target)}`` of one row of :func:`best_source`."""
    return {(int(s), t) for t, s in enumerate(best) if s >= 0}


def views(arrays) -> dict[str, np.ndarray]:
    """method -> stack [L, H+1, m, n]: every head, then the layer view (last index, head ``all``)."""
    out = {}
    for method, key in (("weight", "cross_attention"), ("norm", "cross_norm")):
        heads = np.asarray(arrays[key], dtype=np.float64)
        view = keyspace.layer_view(key)  # the "all heads" rule: the declared view, else the head mean
        layer = heads.mean(axis=1) if view is None else np.asarray(arrays[view], dtype=np.float64)
        out[method] = np.concatenate([heads, layer[:, None]], axis=1)
    return out


def sentence_alignments(arrays, words: SentenceWords) -> dict[tuple[str, str], np.ndarray]:
    """(method, setting) -> best source word [L, H+1, T] (−1: no link); head index H is the layer view."""
    out = {}
    for method, stack in views(arrays).items():
        for setting in SETTINGS:
            out[method, setting] = best_source(stack, words, setting)
    return out


def head_label(h: int, n_heads: int):
    """The head column's value: the head number, or ``all`` for the layer view."""
    return "all" if h == n_heads else h
