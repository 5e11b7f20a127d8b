"""Text and small helpers of the Trust page (no computation: normviz.trust computes; this says what it means)."""
from __future__ import annotations

import math

import pandas as pd

DEFAULT_KEYS = ("attention", "norm", "attn_res_ln", "ff_res", "rollout_attention", "rollout_attn_res_ln",
                "rollout_ff_res", "alti", "rollout_alti")
TAB = "Which map to trust"
COLUMNS = ("attribution", "spearman", "kendall", "comprehensiveness", "sufficiency", "spearman_heads", "gap")

MEANING = """
**What the ground truth is.** *Attention knockout* (Geva et al. 2023, here in every layer and head at once):
for each source token j, every attention edge from j into another position gets a pre-softmax score of −∞, so
each row renormalises over the edges left; j's own row is kept. Its delta is the prediction's score (the logit,
or the logit difference to a foil) minus the score with j's routes cut. *Head ablation* (Michel et al. 2019;
mean ablation as in Wang et al. 2023): head (l, h)'s output before W^O is set to 0 (or its corpus mean) at every
position. A model without an LM head (minilm) has no logit: there the delta is how far the final state at the
position moves, ‖h_i − h̃_i‖.

**What the scores are.** *Spearman ρ* and *Kendall τ-b*: how well an attribution orders the tokens as the
knockout deltas do, over the tokens that knockout can cut (before the predicted position on a decoder; every
other token on an encoder). 1: the same order; 0: no relation (the *random* row shows chance). *AOPC
comprehensiveness / sufficiency* (DeYoung et al. 2020, ERASER; as ferret computes them): the score lost when an
attribution's top 10/30/50 % tokens are replaced by a baseline token (higher is better), or when all *but* them
are (lower is better). *Gap*: the score minus the attribution's sum (0 for an exact decomposition such as
sources; integrated gradients and input × gradient miss by this much).

**Where the answer depends on the question.** Knockout measures whether a token's *route* is **necessary**:
cut it and see what is lost. An exact decomposition (sources, the direct head parts) measures what a token's
vector **carries** into the prediction. They disagree without either being wrong: a token can carry much and be
replaceable (another route carries the same, so knocking it out costs little), or carry little directly yet be
needed to steer other heads' attention. The per-layer maps (last-layer row here) see one layer only; the rollouts
chain them. A high Spearman says an attribution answers the knockout's question well, not that it is exact.
"""


def table(rows: list[dict]) -> pd.DataFrame:
    """The per-text rows as a frame (None → NaN), the columns that hold at least one number."""
    df = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS))
    keep = [c for c in COLUMNS if c == "attribution" or df[c].notna().any()]
    return df[keep]


def corpus_table(rows: list[dict], score: str) -> pd.DataFrame:
    sel = [r for r in rows if r["score"] == score and not math.isnan(r["mean"])]
    sel.sort(key=lambda r: -r["mean"])
    return pd.DataFrame([{"attribution": r["key"], "mean": r["mean"], "95% lo": r["lo"], "95% hi": r["hi"],
                          "texts": r["n"]} for r in sel])
