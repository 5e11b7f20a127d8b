"""Word alignment from an encoder–decoder's cross-attention (Kobayashi et al. 2020 §5): weights vs norms.

>>> import normviz
>>> normviz.aer({(0, 0), (1, 2)}, sure={(0, 0)}, possible={(0, 0), (1, 2)})
0.0
"""

from .aer import AerCounts, aer
from .corpus import AlignResult, align_corpus
from .extract import SETTINGS, best_source, links, sentence_alignments, sentence_words, views, word_scores
from .formats import format_pharaoh, parse_line, read_alignments
from .sentence import SentenceAlignment, align_analysis, cross_matrix, word_text
from .words import detect_scheme, special_tokens, word_groups

__all__ = [
    "AerCounts",
    "AlignResult",
    "SETTINGS",
    "SentenceAlignment",
    "aer",
    "align_analysis",
    "align_corpus",
    "best_source",
    "cross_matrix",
    "detect_scheme",
    "format_pharaoh",
    "links",
    "parse_line",
    "read_alignments",
    "sentence_alignments",
    "sentence_words",
    "special_tokens",
    "views",
    "word_groups",
    "word_scores",
    "word_text",
]
