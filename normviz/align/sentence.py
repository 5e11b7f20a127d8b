"""One sentence pair's alignments from its Analysis: what the Translate page shows (no Streamlit here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .aer import aer
from .extract import SETTINGS, SentenceWords, links, sentence_alignments, sentence_words, views
from .words import special_tokens

MARKERS = ("▁", "Ġ")


def word_text(tokens: list[str], group: list[int]) -> str:
    """A word spelled from its tokens, subword markers removed (``▁ca`` ``t`` → ``cat``)."""
    out = []
    for k, i in enumerate(group):
        t = tokens[i]
        if k == 0 and t.startswith(MARKERS):
            t = t[1:]
        if k > 0 and t.startswith("##"):
            t = t[2:]
        if t.endswith("@@"):
            t = t[:-2]
        out.append(t)
    return "".join(out) or tokens[group[0]]


@dataclass
class SentenceAlignment:
    src_words: list[str]
    tgt_words: list[str]
    words: SentenceWords
    best: dict  # (method, setting) -> int [L, H+1, T], −1 = no link; head index H = the layer view
    n_heads: int

    def links(self, method: str, setting: str, layer: int, head: int | None) -> set:
        """Predicted ``(source word, target word)`` links; ``head=None``: the layer view."""
        h = self.n_heads if head is None else head
        return links(self.best[method, setting][layer, h])

    def layer_aer(self, sure, possible=None) -> list[dict]:
        """AER of every layer view against one gold alignment: rows layer, weight/norm × AWI/AWO."""
        L = next(iter(self.best.values())).shape[0]
        rows = []
        for layer in range(L):
            row = {"layer": layer}
            for setting in SETTINGS:
                for method in ("weight", "norm"):
                    row[f"{method} {setting}"] = aer(self.links(method, setting, layer, None), sure, possible)
            rows.append(row)
        return rows

    def gold_problem(self, sure, possible) -> str | None:
        """Why a gold alignment cannot belong to this pair (a link outside the words), or None."""
        for s, t in sorted(set(sure) | set(possible or ())):
            if s >= len(self.src_words) or t >= len(self.tgt_words):
                return (
                    f"the gold link {s}-{t} is outside the sentence ({len(self.src_words)} source words "
                    f"0…{len(self.src_words) - 1}, {len(self.tgt_words)} target words "
                    f"0…{len(self.tgt_words) - 1}; Pharaoh links are 0-based)"
                )
        return None


def align_analysis(analysis, tokenizer, scheme: str = "auto") -> SentenceAlignment:
    """Hard alignments of every layer/head/method/setting for one Analysis holding the cross maps."""
    special = special_tokens(tokenizer)
    src, tgt = list(analysis.src_tokens), list(analysis.tgt_tokens)
    words = sentence_words(src, tgt, special, scheme)
    best = sentence_alignments(analysis, words)
    n_heads = np.asarray(analysis["cross_attention"]).shape[1]
    return SentenceAlignment(
        [word_text(src, g) for g in words.src_groups],
        [word_text(tgt[1:], g) for g in words.tgt_groups],
        words,
        best,
        n_heads,
    )


def cross_matrix(analysis, method: str, layer: int, head: int | None) -> np.ndarray:
    """The token-level map shown for one view: weights (head mean for the layer view) or norms
    (``cross_norm_layer`` for the layer view)."""
    stack = views(analysis)[method]
    return stack[layer, stack.shape[1] - 1 if head is None else head]
