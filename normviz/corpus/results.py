"""Turn a merged state (see :mod:`normviz.corpus.stats`) into tidy tables and a JSON summary.

Tables (one row per observation, long where a dimension varies):
  head_stats       layer, head, fx_cv, fx_cv_pooled, rho_alpha_fx, rho_fx_freq, mixing_attention, mixing_norm,
                   mixing_share_norm
  layer_stats      layer, the head means of the above, mixing_<map> (the 2021 paper's ratio),
                   mixing_share_<map> (normviz's earlier share of norms), ff_change_<map>
The summary keeps the paper's statistics under ``statistics`` (next to ``paper_reference_bert_base``) and
the share statistics apart, under ``other_definitions``; ``definitions`` says which formula each uses.
  category_shares  layer, head, category, weight_share, norm_share, token_share
  tokens           token_id, token, count, freq_rank, fx_norm_mean (mean over layers and heads)
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .stats import (
    CATEGORIES,
    FF_AFTER,
    LAYER_MIX_KEYS,
    MIX_DEFINITION,
    PAPER_MIX_KEYS,
    SHARE_DEFINITION,
    rowwise_spearman,
)

# Values the papers report for BERT-base (for the summary; what a small model shows may differ).
PAPER_REFERENCE = {
    "fx_cv": {"value": 0.22, "source": "Kobayashi et al. 2020, Table 1 (BERT-base, mean CV of ‖f(x)‖)"},
    "mixing_attention": {"value": 0.971, "source": "Kobayashi et al. 2021, Table 2 (BERT-base, weights)"},
    "mixing_norm_layer": {"value": 0.852, "source": "Kobayashi et al. 2021, Table 2 (BERT-base, norms)"},
    "mixing_attn_res": {"value": 0.223, "source": "Kobayashi et al. 2021, Table 2 (BERT-base, + residual)"},
    "mixing_attn_res_ln": {"value": 0.188, "source": "Kobayashi et al. 2021, Table 2 (BERT-base, + residual + LN)"},
}


def _div(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return np.divide(a, b, out=np.full(np.broadcast(a, b).shape, np.nan), where=b > 0)


def freq_spearman(state) -> np.ndarray:
    """[L, H] Spearman ρ between each type's mean ‖f(x)‖ and its frequency rank (1 = most frequent)."""
    counts = state["type_count"]
    fx = state["type_fx_sum"]
    L, H = fx.shape[:2]
    if counts.size < 3:
        return np.full((L, H), np.nan)
    rank = rankdata_desc(counts)
    mean = fx / counts
    return rowwise_spearman(np.broadcast_to(rank, mean.shape).copy(), mean)


def rankdata_desc(counts: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(-np.asarray(counts, dtype=np.float64))


def tables(state: dict, n_layers: int, n_heads: int) -> dict[str, pd.DataFrame]:
    L, H = n_layers, n_heads
    layer, head = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
    hs = {"layer": layer.ravel(), "head": head.ravel()}
    ls: dict[str, np.ndarray] = {"layer": np.arange(L)}
    out: dict[str, pd.DataFrame] = {}
    if "fx_cv_sum" in state:
        cv = _div(state["fx_cv_sum"], state["fx_cv_count"])
        mean = _div(state["fx_sum"], state["fx_count"])
        var = np.maximum(_div(state["fx_sumsq"], state["fx_count"]) - mean**2, 0)
        hs["fx_cv"] = cv.ravel()
        hs["fx_cv_pooled"] = (np.sqrt(var) / mean).ravel()
        hs["fx_norm_mean"] = mean.ravel()
        ls["fx_cv"] = np.nanmean(cv, 1)
        ls["fx_norm_mean"] = mean.mean(1)
    if "rho_alpha_fx_sum" in state:
        rho = _div(state["rho_alpha_fx_sum"], state["rho_alpha_fx_count"])
        hs["rho_alpha_fx"] = rho.ravel()
        ls["rho_alpha_fx"] = np.nanmean(rho, 1)
    if "type_count" in state:
        rho = freq_spearman(state)
        hs["rho_fx_freq"] = rho.ravel()
        ls["rho_fx_freq"] = np.nanmean(rho, 1)
        counts = state["type_count"]
        order = np.lexsort((state["type_ids"], -counts))
        out["tokens"] = pd.DataFrame(
            {
                "token_id": state["type_ids"][order],
                "token": state["type_tokens"][order],
                "count": counts[order].astype(np.int64),
                "freq_rank": rankdata_desc(counts)[order],
                "fx_norm_mean": (state["type_fx_sum"].mean((0, 1)) / np.maximum(counts, 1))[order],
            }
        )
    if "mixing_head_rows" in state:
        hs["mixing_attention"] = _div(state["mixing_head_attention_sum"], state["mixing_head_rows"]).ravel()
        hs["mixing_norm"] = _div(state["mixing_head_norm_sum"], state["mixing_head_norm_rows"]).ravel()
        hs["mixing_share_norm"] = _div(state["mixing_head_share_norm_sum"], state["mixing_head_rows"]).ravel()
        for k in PAPER_MIX_KEYS:
            ls[f"mixing_{k}"] = _div(state[f"mixing_{k}_sum"], state[f"mixing_{k}_rows"])
        for k in LAYER_MIX_KEYS:
            if f"mixing_share_{k}_sum" in state:
                ls[f"mixing_share_{k}"] = _div(state[f"mixing_share_{k}_sum"], state[f"mixing_share_{k}_rows"])
    for k in FF_AFTER:
        if f"ff_change_{k}_sum" in state:
            ls[f"ff_change_{k}"] = _div(state[f"ff_change_{k}_sum"], state[f"ff_change_{k}_count"])
    if "share_weight" in state:
        C = len(CATEGORIES)
        w = _div(state["share_weight"], state["share_rows"])
        nm = _div(state["share_norm"], state["share_rows"])
        tok = _div(state["category_tokens"], state["category_tokens"].sum())
        out["category_shares"] = pd.DataFrame(
            {
                "layer": np.repeat(layer.ravel(), C),
                "head": np.repeat(head.ravel(), C),
                "category": np.tile(np.array(CATEGORIES), L * H),
                "weight_share": w.reshape(-1),
                "norm_share": nm.reshape(-1),
                "token_share": np.tile(tok, L * H),
            }
        )
    out["head_stats"] = pd.DataFrame(hs)
    out["layer_stats"] = pd.DataFrame(ls)
    return out


def summary(state: dict, tabs: dict[str, pd.DataFrame]) -> dict:
    """Corpus-level means (over layers, and heads where per head) with the papers' BERT-base values."""
    out: dict = {"sequences": int(state["n_sequences"]), "tokens": int(state["n_tokens"]), "statistics": {}}
    stats = out["statistics"]
    ls = tabs["layer_stats"]
    other: dict = {}
    for col in ls.columns:
        if col == "layer":
            continue
        (other if col.startswith("mixing_share_") else stats)[col] = _float(
            np.nanmean(ls[col].to_numpy(dtype=np.float64))
        )
    if "head_stats" in tabs and "fx_cv_pooled" in tabs["head_stats"]:
        stats["fx_cv_pooled"] = _float(np.nanmean(tabs["head_stats"]["fx_cv_pooled"]))
    if "category_shares" in tabs:
        cs = (
            tabs["category_shares"]
            .groupby("category", sort=False)[["weight_share", "norm_share", "token_share"]]
            .mean()
        )
        stats["category_shares"] = {c: {k: _float(v) for k, v in cs.loc[c].items()} for c in cs.index}
    out["paper_reference_bert_base"] = {k: v for k, v in PAPER_REFERENCE.items()}
    if other:
        out["other_definitions"] = other  # not comparable with the paper's numbers
    defs = {
        k: MIX_DEFINITION + "; pooled over tokens per layer, mean over layers (2021 Table 2)"
        for k in stats
        if k.startswith("mixing_")
    }
    defs.update({k: SHARE_DEFINITION for k in other})
    if defs:
        out["definitions"] = defs
    return out


def _float(x) -> float | None:
    x = float(x)
    return None if not np.isfinite(x) else round(x, 6)
