"""The numba source of the GELU path integrals (:func:`normviz.core.activations.path_integral`), one pass per value.

I(a) = ∫₀¹g(t·a)dt of GELU or GELU-tanh is read from one table (:func:`normviz.core.activations.ig_table`): its
values, first and second derivatives at the knots k·h (h = 1/256) of |a| ∈ [0, 10], one table per sign of a,
joined by quintic Hermite interpolation (error ≤ h⁶/46080·max|I⁽⁶⁾| per interval, below 1e-13 of I(a) itself: the
interpolant is exact at a = 0 in value, slope 1/4 and curvature, so the relative error stays bounded as a → 0).
Beyond |a| = 10 the gate is a (a > 10) or 0 (a < −10) to within 1e-22, so ∫₀^a g is the knot's integral plus
(a² − 100)/2, or constant. The table is built from the reference formulas of :mod:`normviz.core.activations` (GELU's
closed form, GELU-tanh's difference by quadrature) and the kernels are tested against those within 1e-13. Per value
this is a table read, a degree-5 polynomial and, for the gate factor, g(a) itself (GELU-tanh's tanh by one exp):
about 3× less CPU than evaluating the closed form (erf, exp) and the difference table per value, which was gemma3's
largest cost in explain + sources. Imported (and numba with it) on first use only.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@numba.njit(cache=True, nogil=True, inline="always")
def _ndtr(a):  # pragma: no cover - compiled
    # Φ(a) as scipy's (cephes') ndtr: 0.5 + 0.5·erf(a/√2) near 0, else from erfc of |a|/√2
    x = a * _SQRT_HALF
    z = abs(x)
    if z < _SQRT_HALF:
        return 0.5 + 0.5 * math.erf(x)
    y = 0.5 * math.erfc(z)
    return 1.0 - y if x > 0 else y


@numba.njit(cache=True, nogil=True, inline="always")
def _gate(x, tanh):  # pragma: no cover - compiled
    # g(x): GELU-tanh x/2·(1 + tanh u), u = √(2/π)(x + 0.044715x³), tanh u = (1 − e)/(1 + e), e = exp(−2u), for
    # u ≥ 0 (odd): its absolute error ~1e-16 is all that 1 + tanh u needs (1.4× faster than libm's tanh); GELU x·Φ(x)
    if not tanh:
        return x * _ndtr(x)
    u = _SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)
    e = math.exp(-2.0 * abs(u))
    th = (1.0 - e) / (1.0 + e)
    return 0.5 * x * (1.0 + (th if u >= 0 else -th))


@numba.njit(cache=True, nogil=True, inline="always")
def _path_integral(x, table, inv_h, cut, s_pos, s_neg):  # pragma: no cover - compiled
    # I(x) for x ≠ 0 from the table [2, N, 3] (side 0: x > 0, side 1: x < 0, per knot I, h·dI/d|x|, h²·d²I/d|x|²)
    y = abs(x)
    side = 0 if x > 0 else 1
    if y >= cut:
        return (s_pos + 0.5 * (y * y - cut * cut)) / y if side == 0 else -s_neg / y
    s = y * inv_h
    k = np.int64(s)
    t = s - k
    t2 = t * t
    t3 = t2 * t
    t4 = t3 * t
    t5 = t4 * t
    return (
        (1.0 - 10.0 * t3 + 15.0 * t4 - 6.0 * t5) * table[side, k, 0]
        + (t - 6.0 * t3 + 8.0 * t4 - 3.0 * t5) * table[side, k, 1]
        + 0.5 * (t2 - 3.0 * t3 + 3.0 * t4 - t5) * table[side, k, 2]
        + 0.5 * (t3 - 2.0 * t4 + t5) * table[side, k + 1, 2]
        + (-4.0 * t3 + 7.0 * t4 - 3.0 * t5) * table[side, k + 1, 1]
        + (10.0 * t3 - 15.0 * t4 + 6.0 * t5) * table[side, k + 1, 0]
    )


@numba.njit(cache=True, nogil=True)
def gelu_path_integrals(a, tanh, table, inv_h, cut, s_pos, s_neg, out):  # pragma: no cover - compiled
    # out[i] = I(a[i]) = ∫_0^1 g(t·a[i]) dt (tanh: GELU-tanh; ``table`` is that gate's), 0 at a = 0; a, out 1-d
    for i in range(a.size):
        x = np.float64(a[i])
        out[i] = 0.0 if x == 0.0 else _path_integral(x, table, inv_h, cut, s_pos, s_neg)


@numba.njit(cache=True, nogil=True)
def gelu_gate_factors(a, b, tanh, table, inv_h, cut, s_pos, s_neg, half, gate, up):  # pragma: no cover - compiled
    # A gated unit g(a)·b's integrated-gradients factors (feedforward.unit_factors) from its real gate and up
    # pre-activations a, b (1-d, float32 or float64; computed in float64): up[i] = I2 = ∫_0^1 g(t·a) dt and
    # gate[i] = b·I1, I1 = ∫_0^1 t·g′(t·a) dt = (g(a) − I2)/a by parts (``half`` = g′(0)/2 at a = 0)
    for i in range(a.size):
        x = np.float64(a[i])
        if x == 0.0:
            up[i] = 0.0
            gate[i] = np.float64(b[i]) * half
            continue
        i2 = _path_integral(x, table, inv_h, cut, s_pos, s_neg)
        up[i] = i2
        gate[i] = np.float64(b[i]) * ((_gate(x, tanh) - i2) / x)
