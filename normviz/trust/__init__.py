"""Which map to trust: every attribution of one prediction beside ground truth by intervention, and scores.

    faithfulness(lm, texts, ...)   a :class:`Faithfulness`: per text and key, Spearman / Kendall against attention
                                   knockout (and the direct head parts against head ablation), ERASER's AOPC
                                   comprehensiveness and sufficiency, completeness gaps; summaries with bootstrap
                                   confidence intervals (:meth:`Faithfulness.summary`, :meth:`Faithfulness.table`)
    explain_text(session, ...)     one text: the ground truth and every attribution as [n] vectors (a :class:`Text`)

Modules: :mod:`.attributions` (per-token vectors from a session), :mod:`.erasure` (AOPC), :mod:`.scores`
(rank correlations, bootstrap), :mod:`.report` (the corpus run and its table), :mod:`.cli`
(``normviz faithfulness``). The interventions themselves: :mod:`normviz.attribution.knockout`.
"""

from .attributions import Text, explain_text, target_position
from .report import Faithfulness, faithfulness
from .scores import bootstrap_ci, kendall, spearman

__all__ = [
    "Faithfulness",
    "Text",
    "bootstrap_ci",
    "explain_text",
    "faithfulness",
    "kendall",
    "spearman",
    "target_position",
]
