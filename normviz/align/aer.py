"""Alignment error rate (Och & Ney 2003), as Kobayashi et al. 2020 §5 report it.

An alignment is a set of 0-based ``(source_word, target_word)`` pairs. With predicted links A, sure gold
links S and possible gold links P ⊇ S:

    AER = 1 − (|A∩S| + |A∩P|) / (|A| + |S|)

Over a corpus the counts are summed over sentences first (one ratio, not a mean of sentence ratios), as the
authors' ``calculate_aer.py`` does: :class:`AerCounts`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

Link = tuple[int, int]


def _sets(predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link] | None):
    a = {(int(s), int(t)) for s, t in predicted}
    s = {(int(i), int(j)) for i, j in sure}
    p = set(s) if possible is None else {(int(i), int(j)) for i, j in possible} | s  # possible ⊇ sure
    return a, s, p


def aer(predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link] | None = None) -> float:
    """AER of one alignment: 1 − (|A∩S| + |A∩P|)/(|A| + |S|); ``possible=None`` means P = S.

    ``possible`` is taken together with ``sure`` (P = possible ∪ S). Nothing predicted and nothing to find
    (|A| + |S| = 0) is no error: 0.0."""
    c = AerCounts()
    c.add(predicted, sure, possible)
    return c.aer


@dataclass
class AerCounts:
    """Running sums |A|, |S|, |A∩S|, |A∩P| over sentences; ``aer``, ``precision``, ``recall`` of the corpus."""

    a: int = 0
    s: int = 0
    a_s: int = 0
    a_p: int = 0

    def add(self, predicted: Iterable[Link], sure: Iterable[Link], possible: Iterable[Link] | None = None) -> None:
        a, s, p = _sets(predicted, sure, possible)
        self.a += len(a)
        self.s += len(s)
        self.a_s += len(a & s)
        self.a_p += len(a & p)

    @property
    def aer(self) -> float:
        total = self.a + self.s
        return 0.0 if total == 0 else 1.0 - (self.a_s + self.a_p) / total

    @property
    def precision(self) -> float:
        """|A∩P| / |A| (1.0 when nothing is predicted)."""
        return 1.0 if self.a == 0 else self.a_p / self.a

    @property
    def recall(self) -> float:
        """|A∩S| / |S| (1.0 when there is nothing to find)."""
        return 1.0 if self.s == 0 else self.a_s / self.s
