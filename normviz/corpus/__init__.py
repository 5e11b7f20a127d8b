"""Corpus statistics: the papers' findings as statistics over a whole text file (issue 5).

>>> from normviz.corpus import CorpusJob, run_corpus
>>> res = run_corpus(CorpusJob(model="minilm", input="assets/corpus/us_founding_documents.txt", out="out"))
>>> res.summary["statistics"]["mixing_attn_res"]

Definitions of every statistic: :mod:`normviz.corpus.stats`. Engines: in-process (default) or Ray Data
(:mod:`normviz.corpus.ray_engine`); one chunk of lines: :mod:`normviz.corpus.chunks`; sharded models:
``CorpusJob(device_map="auto")`` (:func:`normviz.load`'s ``device_map``).
"""

from .engine import CorpusJob, CorpusResult, run_corpus
from .stats import CATEGORIES, STAT_TITLES, STATISTICS

__all__ = ["CATEGORIES", "CorpusJob", "CorpusResult", "STATISTICS", "STAT_TITLES", "run_corpus"]
