"""ERASER's erasure scores (DeYoung et al. 2020, as ferret computes them; Attanasio et al. 2023), with removal
replaced by a stated baseline token at the removed positions (the length stays the same, so one batched pass):

    comprehensiveness_k = F(x) − F(x with its top-k% tokens replaced)          (higher: the tokens were needed)
    sufficiency_k       = F(x) − F(x with every token but its top-k% replaced) (lower: the tokens suffice)
    AOPC = the mean over k in ``BINS``

The tokens that may be replaced are every position except the predicted position and special tokens; top-k%
of them is ceil(k·m) of the m candidates by the attribution's value (largest first). F is the score of the
interventions (logit or logit difference; without an LM head the change is ‖h_i − h̃_i‖ for both scores).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..attribution import intervene

BINS = (0.1, 0.3, 0.5)


def candidates(encoded, i: int) -> np.ndarray:
    return np.array([j for j in range(len(encoded.ids)) if j != i and not encoded.special[j]], dtype=int)


def erased_ids(encoded, i: int, order: np.ndarray, baseline_id: int, bins=BINS) -> list[tuple[str, float, list]]:
    """(kind, k, ids) rows for one attribution's ranking ``order`` of the candidates (best first)."""
    cand = candidates(encoded, i)
    rows = []
    for k in bins:
        top = set(order[: max(1, math.ceil(k * len(cand)))].tolist())
        comp = [baseline_id if j in top else t for j, t in enumerate(encoded.ids)]
        suff = [baseline_id if (j in set(cand.tolist()) and j not in top) else t for j, t in enumerate(encoded.ids)]
        rows += [("comprehensiveness", k, comp), ("sufficiency", k, suff)]
    return rows


def aopc(target, attributions: dict[str, np.ndarray], baseline_id: int, bins=BINS) -> dict[str, dict[str, float]]:
    """{key: {"comprehensiveness": AOPC, "sufficiency": AOPC}} for ``target`` (a
    :class:`normviz.attribution.knockout._Target`-like object: lm, encoded, i, score of ids); identical erased
    inputs of different keys run once."""
    enc, i = target.encoded, target.i
    cand = candidates(enc, i)
    plan, unique = {}, {}
    for key, values in attributions.items():
        v = np.asarray(values, dtype=np.float64)[cand]
        order = cand[np.argsort(-v, kind="stable")]
        plan[key] = erased_ids(enc, i, order, baseline_id, bins)
        for _, _, ids in plan[key]:
            unique.setdefault(tuple(ids), len(unique))
    if not unique or len(cand) == 0:
        return {key: {"comprehensiveness": float("nan"), "sufficiency": float("nan")} for key in attributions}
    all_ids = torch.tensor(list(unique), dtype=torch.long)
    drops = np.empty(len(unique))
    for start, stop in intervene.chunks(len(unique), len(enc.ids), target.batch_tokens):
        drops[start:stop] = target.deltas_of_ids(all_ids[start:stop])
    out = {}
    for key, rows in plan.items():
        per = {"comprehensiveness": [], "sufficiency": []}
        for kind, _, ids in rows:
            per[kind].append(drops[unique[tuple(ids)]])
        out[key] = {kind: float(np.mean(v)) for kind, v in per.items()}
    return out
