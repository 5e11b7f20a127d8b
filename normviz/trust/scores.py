"""Rank agreement and its uncertainty.

spearman(a, b)       Spearman's ρ (Pearson correlation of the ranks, ties averaged); nan when either is constant
kendall(a, b)        Kendall's τ-b (ties corrected); nan when either is constant
bootstrap_ci(v)      (mean, lo, hi): the mean over texts and its 95 % percentile bootstrap interval
                     (resampling texts, 2000 resamples, seeded), nan values left out and counted
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def _usable(a, b):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    a, b = a.ravel(), b.ravel()
    ok = np.isfinite(a) & np.isfinite(b)
    a, b = a[ok], b[ok]
    if a.size < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return a, b


def spearman(a, b) -> float:
    pair = _usable(a, b)
    return float("nan") if pair is None else float(stats.spearmanr(*pair).statistic)


def kendall(a, b) -> float:
    pair = _usable(a, b)
    return float("nan") if pair is None else float(stats.kendalltau(*pair, variant="b").statistic)


def bootstrap_ci(values, resamples: int = 2000, level: float = 0.95, seed: int = 0) -> tuple[float, float, float, int]:
    """(mean, lo, hi, count) over the finite values."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return float("nan"), float("nan"), float("nan"), 0
    if v.size == 1:
        return float(v[0]), float("nan"), float("nan"), 1
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, (resamples, v.size))].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(v.mean()), float(lo), float(hi), int(v.size)
