"""The numba source of the GELU path integrals (:func:`normviz.core.activations.path_integral`), one pass per value.

The numpy formulas of :mod:`normviz.core.activations` (GELU's closed form and its series below |a| = 0.1, the
tabulated GELU-tanh difference D read by cubic Hermite interpolation, its Taylor series below |a| = 8h) evaluated
element by element without temporaries: the numpy version builds about thirty [n, d_ff] float64 arrays per layer,
and was gemma3's largest cost in explain + sources (0.33 s of CPU per layer at n = 1,024, more than its forward).
The same operations on the same float64 values, so both agree to a few ulps (tested); imported (and numba with it)
on first use only.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_SQRT_HALF = math.sqrt(0.5)
_SQRT_2PI = math.sqrt(2.0 * math.pi)
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
def _integral(x, tanh, table_d, table_slope, h, cut, c5, c7, c9):  # pragma: no cover - compiled
    # ∫_0^x gelu (+ [tanh] D(x)) for x ≠ 0: activations._gelu_integral and activations._tanh_difference per value
    x2 = x * x
    if abs(x) < 0.1:
        s = x2 / 4 + x2 * x / _SQRT_2PI * (1 / 3 + x2 * (-1 / 30 + x2 * (1 / 280 + x2 * (-1 / 3024 + x2 / 38016))))
    else:
        s = ((x2 - 1) * _ndtr(x) + x * (math.exp(-0.5 * x2) / _SQRT_2PI)) / 2 + 0.25
    if tanh:
        b = min(abs(x), cut)
        if b < 8 * h:
            s += x2 * x2 * x * (c5 + x2 * (c7 + x2 * c9))
        else:
            k = min(np.int64(b / h), table_d.size - 2)
            t = b / h - k
            t2 = t * t
            t3 = t * t * t
            v = (
                (2 * t3 - 3 * t2 + 1) * table_d[k]
                + (t3 - 2 * t2 + t) * h * table_slope[k]
                + (3 * t2 - 2 * t3) * table_d[k + 1]
                + (t3 - t2) * h * table_slope[k + 1]
            )
            s += v if x > 0 else -v
    return s


@numba.njit(cache=True, nogil=True)
def gelu_path_integrals(a, tanh, table_d, table_slope, h, cut, c5, c7, c9, out):  # pragma: no cover - compiled
    # out[i] = I(a[i]) = ∫_0^a gelu(t·a) dt (tanh: GELU-tanh), 0 at a = 0; a, out 1-d float64
    for i in range(a.size):
        x = a[i]
        out[i] = 0.0 if x == 0.0 else _integral(x, tanh, table_d, table_slope, h, cut, c5, c7, c9) / x


@numba.njit(cache=True, nogil=True)
def gelu_gate_factors(a, b, tanh, table_d, table_slope, h, cut, c5, c7, c9, half, gate, up):  # pragma: no cover
    # A gated unit g(a)·b's integrated-gradients factors (feedforward.unit_factors) from its real gate and up
    # pre-activations a, b (1-d, float32 or float64; computed in float64): up[i] = I2 = ∫_0^1 g(t·a) dt and
    # gate[i] = b·I1, I1 = ∫_0^1 t·g′(t·a) dt = (g(a) − I2)/a by parts (``half`` = g′(0)/2 at a = 0)
    for i in range(a.size):
        x = np.float64(a[i])
        if x == 0.0:
            up[i] = 0.0
            gate[i] = np.float64(b[i]) * half
            continue
        i2 = _integral(x, tanh, table_d, table_slope, h, cut, c5, c7, c9) / x
        if tanh:
            g = 0.5 * x * (1 + math.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)))
        else:
            g = x * _ndtr(x)
        up[i] = i2
        gate[i] = np.float64(b[i]) * ((g - i2) / x)
