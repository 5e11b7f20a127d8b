"""Text and small helpers of the Trust page (no computation: normviz.trust computes; this says what it means)."""

from __future__ import annotations

import math

import pandas as pd

DEFAULT_KEYS = (
    "attention",
    "norm",
    "attn_res_ln",
    "ff_res",
    "rollout_attention",
    "rollout_attn_res_ln",
    "rollout_ff_res",
    "alti",
    "rollout_alti",
)
TAB = "Which map to trust"
BESIDE = ("sources", "attention", "attn_res_ln", "rollout_attn_res_ln")  # drawn beside knockout, when computed
BESIDE_AT_MOST = 4
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
sources; integrated gradients and input × gradient miss by this much; "n/a" for maps and rollouts, which do not
claim to add up to the score). A comprehensiveness can be negative: the baseline token that replaces the top tokens
is itself read by the model and may raise the score, and tokens that held the prediction down count as "top" for a
method that ranks by size.

**Where the answer depends on the question.** Knockout measures whether a token's *route* is **necessary**:
cut it and see what is lost. An exact decomposition (sources, the direct head parts) measures what a token's
vector **carries** into the prediction. They disagree without either being wrong: a token can carry much and be
replaceable (another route carries the same, so knocking it out costs little), or carry little directly yet be
needed to steer other heads' attention. The per-layer maps (last-layer row here) see one layer only; the rollouts
chain them. A high Spearman says an attribution answers the knockout's question well, not that it is exact.
"""


# readable names of the methods that are not maps (maps: their registry title) and of the scores
METHOD_NAMES = {
    "sources": "Exact sources (decomposition)",
    "direct_heads": "Direct head parts",
    "input_x_gradient": "Input × gradient",
    "integrated_gradients": "Integrated gradients",
    "random": "Random order (chance)",
}
SCORE_NAMES = {
    "attribution": "Method",
    "spearman": "Rank agreement ρ (Spearman)",
    "kendall": "Kendall τ",
    "comprehensiveness": "Comprehensiveness (higher is better)",
    "sufficiency": "Sufficiency (lower is better)",
    "spearman_heads": "Heads: ρ vs head ablation",
    "gap": "Gap: score − sum",
}
NO_GAP = "n/a: not a split of the score"  # maps and rollouts do not claim to add up to the score
NEGATIVE_COMPREHENSIVENESS = (
    "A negative comprehensiveness: replacing the method's top tokens by the baseline token *raised* the score. "
    "The baseline token is itself a token the model reads (on a decoder it can push the prediction more than the "
    "tokens it replaced), and tokens that held the prediction down count as 'top' for a method that ranks by "
    "size, not sign. Knockout cuts routes instead of replacing tokens, so even its own order can score below 0."
)
NORM_BASED = ("norm", "attn_res", "alti", "ff_res")  # key parts of the norm-based maps (and their rollouts)


def method_name(key: str) -> str:
    """'Attention weights α' for a map key (its registry title), 'Input × gradient' for a method key."""
    if key in METHOD_NAMES:
        return METHOD_NAMES[key]
    from ..kit.keys import title

    return title(key)


def _number(v) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _scored(rows: list[dict]) -> dict[str, float]:
    """Each method's rank agreement ρ with knockout, those with one (the random order left out)."""
    rho = {r["attribution"]: _number(r.get("spearman")) for r in rows}
    return {k: v for k, v in rho.items() if v is not None and k != "random"}


def beside(rows: list[dict], computed) -> list[str]:
    """The maps drawn beside knockout, at most ``BESIDE_AT_MOST``: the one the verdict names (highest ρ) first,
    then ``BESIDE``'s, those in ``computed``. On minilm the verdict named Norm ‖αf‖, which the chart lacked."""
    scored = _scored(rows)
    first = [max(scored, key=scored.get)] if scored else []
    keys = [k for k in (*first, *BESIDE) if k in computed]
    return list(dict.fromkeys(keys))[:BESIDE_AT_MOST]


def verdict(rows: list[dict]) -> str | None:
    """One line in plain words from the per-text rows: which method orders the tokens most like knockout, and
    whether attention weights do better than chance (the random row). None without any rank agreement."""
    rho = {r["attribution"]: _number(r.get("spearman")) for r in rows}
    scored = _scored(rows)
    if not scored:
        return None
    best = max(scored, key=scored.get)
    chance, attention = rho.get("random"), scored.get("attention")
    if scored[best] <= 0 or (chance is not None and scored[best] <= chance):
        # a best ρ at or below 0 (or below the random order) tracks nothing: say so, never "tracks best"
        line = (
            f"Here no method orders the tokens like knockout: the closest, {method_name(best)}, reaches only "
            f"ρ = {scored[best]:.2f} (1 = the same order, 0 = unrelated)"
        )
        line += f", random order {chance:.2f}" if chance is not None else ""
        return line + ". One text: the corpus run below says how far it holds."
    family = " — a norm-based map —" if any(p in best for p in NORM_BASED) else ""
    line = (
        f"Here {method_name(best)}{family} tracks knockout best: rank agreement ρ = {scored[best]:.2f} "
        "(1 = the same order)"
    )
    if attention is not None and best != "attention":
        near = abs(attention) < 0.3 or (chance is not None and attention - chance < 0.2)
        at_chance = f", random order {chance:.2f}" if chance is not None else ""
        if near:
            line += f"; attention weights are near chance (ρ = {attention:.2f}{at_chance})"
        else:  # its own brackets only around the random order (the screenshots showed "…, random order -0.21).")
            line += f"; attention weights reach ρ = {attention:.2f}" + (f" ({at_chance[2:]})" if at_chance else "")
    return line + ". One text: the corpus run below says how far it holds."


def table(rows: list[dict]) -> pd.DataFrame:
    """The per-text rows as a frame with readable method and score names, the columns that hold at least one
    number; the gap column in words where a method is not a split of the score (never "None")."""
    df = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS))
    keep = [c for c in COLUMNS if c == "attribution" or df[c].notna().any()]
    df = df[keep].copy()
    df["attribution"] = [method_name(k) for k in df["attribution"]]
    for c in keep[1:]:
        df[c] = pd.to_numeric(df[c], errors="coerce")
    if "gap" in df:
        df["gap"] = [NO_GAP if _number(v) is None else f"{v:.3g}" for v in df["gap"]]
    return df.rename(columns=SCORE_NAMES)


def corpus_table(rows: list[dict], score: str) -> pd.DataFrame:
    sel = [r for r in rows if r["score"] == score and not math.isnan(r["mean"])]
    sel.sort(key=lambda r: -r["mean"])
    return pd.DataFrame(
        [
            {"attribution": r["key"], "mean": r["mean"], "95% lo": r["lo"], "95% hi": r["hi"], "texts": r["n"]}
            for r in sel
        ]
    )
