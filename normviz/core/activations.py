"""Exact integrated-gradients factors of the feed-forward activations (Kobayashi et al. 2024).

An element-wise activation g with g(0) = 0, split by integrated gradients from a zero baseline along the
straight path, gives part c of the pre-activation p the share p_c·g(p)/p (:func:`activation_ratio`). A
SwiGLU unit silu(a)·b is split with the path integrals ∫₀¹silu(ta)dt and ∫₀¹t·silu′(ta)dt, both in closed
form (:func:`silu_path_integral`).
"""
from __future__ import annotations

import numpy as np
import torch


def _j_integral(x: np.ndarray) -> np.ndarray:
    """J(x) = ∫_0^x u σ(−u) du for x ≥ 0, in closed form (float64).

    Σ_k (−1)^{k+1} e^{−ku}(u/k + 1/k²) integrates the tail, so J(x) = π²/12 − x·log(1+e^{−x}) + Li2(−e^{−x})
    (Li2(−y) = scipy's spence(1+y)). Below x = 0.1, where that difference cancels, the Taylor series
    x²/4 − x³/12 + x⁵/240 − x⁷/3360 + 17x⁹/725760 (from u/(1+e^u) = u/2 − u²/4 + u⁴/48 − …) is used.
    """
    from scipy.special import spence

    x = np.asarray(x, dtype=np.float64)
    y = np.exp(-x)
    closed = np.pi**2 / 12 - x * np.log1p(y) + spence(1.0 + y)
    x2 = x * x
    taylor = x2 * (0.25 + x * (-1 / 12 + x2 * (1 / 240 + x2 * (-1 / 3360 + x2 * 17 / 725760))))
    return np.where(x < 0.1, taylor, closed)


def silu_path_integral(a: torch.Tensor) -> torch.Tensor:
    """I(a) = ∫_0^1 silu(t·a) dt, to float64 precision.

    ∫_0^a silu = a²/2 − J(a) for a ≥ 0 and J(|a|) for a < 0 (J from :func:`_j_integral`); I(a) = that / a,
    I(0) = 0.
    """
    an = a.detach().to("cpu", torch.float64).numpy()
    j = _j_integral(np.abs(an))
    s = np.where(an >= 0, an * an / 2 - j, j)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(an == 0, 0.0, s / np.where(an == 0, 1.0, an))
    return torch.from_numpy(out).to(device=a.device, dtype=a.dtype)


def activation_ratio(act, p: torch.Tensor) -> torch.Tensor:
    """g(p)/p per unit: the exact integrated-gradients factor of an activation with g(0) = 0.

    Part c of the pre-activation gets p_c·g(p)/p; at p = 0 the limit g′(0) is used.
    """
    g = act(p)
    h = 1e-4
    probe = torch.tensor([h, -h], dtype=torch.float64)  # on the CPU: activations hold no weights; mps has no f64
    slope0 = float((act(probe)[0] - act(probe)[1]) / (2 * h))
    safe = torch.where(p == 0, torch.ones_like(p), p)
    return torch.where(p == 0, torch.full_like(p, slope0), g / safe)


def check_activation(act, gated: bool) -> str | None:
    """Why an activation can't be split exactly, or None."""
    probe = torch.linspace(-6, 6, 25, dtype=torch.float64)
    zero = float(act(torch.zeros(1, dtype=torch.float64))[0])
    if abs(zero) > 1e-12:
        return f"activation {type(act).__name__} has g(0) = {zero} ≠ 0"
    if gated and not torch.allclose(act(probe), probe * torch.sigmoid(probe), atol=1e-12, rtol=1e-12):
        return f"gated FF with activation {type(act).__name__}: only SiLU/Swish gates are decomposed"
    return None
