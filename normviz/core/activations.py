"""Exact integrated-gradients factors of the feed-forward activations (Kobayashi et al. 2024).

An element-wise activation g with g(0) = 0, split by integrated gradients from a zero baseline along the
straight path, gives part c of the pre-activation p the share p_c·g(p)/p (:func:`activation_ratio`). A
SwiGLU unit silu(a)·b is split with the path integrals ∫₀¹silu(ta)dt and ∫₀¹t·silu′(ta)dt, both in closed
form (:func:`silu_path_integral`).
"""

from __future__ import annotations

import concurrent.futures
import functools
import importlib.util
import threading
import warnings

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


def _gelu_integral(a: np.ndarray) -> np.ndarray:
    """∫_0^a x·Φ(x) dx = ((a² − 1)·Φ(a) + a·φ(a)) / 2 + 1/4, exactly (d/da of the bracket is 2a·Φ(a)). Below
    |a| = 0.1, where that sum cancels (it is ≈ a²/4), the series a²/4 + Σ_k (−1)^k a^(2k+3) / (√(2π) 2^k k!
    (2k+1)(2k+3)), k ≤ 4 (the next term is below 1e-15 of the sum there)."""
    from scipy.special import ndtr

    phi = np.exp(-0.5 * a * a) / np.sqrt(2 * np.pi)
    closed = ((a * a - 1) * ndtr(a) + a * phi) / 2 + 0.25
    a2 = a * a
    series = a2 / 4 + a2 * a / np.sqrt(2 * np.pi) * (
        1 / 3 + a2 * (-1 / 30 + a2 * (1 / 280 + a2 * (-1 / 3024 + a2 / 38016)))
    )
    return np.where(np.abs(a) < 0.1, series, closed)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


def _gelu_erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return x * ndtr(x)


TANH_CUT = 10.0  # beyond |x| = 10, |gelu_tanh − gelu| < 1e-21: the difference's integral stops there
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(16)
TANH_PANELS = 40  # Gauss–Legendre panels of [0, 10]: the difference's quadrature error < 1e-16 (tested)


def _tanh_difference_quadrature(a: np.ndarray, panels: int = TANH_PANELS) -> np.ndarray:
    """D(a) = ∫_0^a (gelu_tanh − gelu) by composite 16-point Gauss–Legendre over [0, clip(a, ±10)] in 40 panels
    (the difference is smooth, below 2e-4 and vanishing beyond |x| ≈ 6): 640 evaluations per value, so it builds
    the table of :func:`_tanh_table` and is the reference the table is tested against."""
    b = np.clip(a, -TANH_CUT, TANH_CUT).reshape(-1)
    edges = np.linspace(0.0, 1.0, panels + 1)
    t = (edges[:-1, None] + (edges[1:] - edges[:-1])[:, None] * (_NODES[None] + 1) / 2).reshape(-1)  # on [0, 1]
    w = np.repeat((edges[1:] - edges[:-1]) / 2, len(_NODES)) * np.tile(_WEIGHTS, panels)
    diff = np.empty_like(b)
    step = max(1, 2**22 // t.size)
    for k in range(0, b.size, step):
        x = b[k : k + step, None] * t[None]
        diff[k : k + step] = b[k : k + step] * ((_gelu_tanh(x) - _gelu_erf(x)) @ w)
    return diff.reshape(np.shape(a))


TANH_TABLE_H = 1.0 / 512  # the table's step on [0, 10]: cubic Hermite error ≤ h⁴/384·max|d‴| < 1e-16 absolute


@functools.lru_cache(maxsize=1)
def _tanh_table() -> tuple[np.ndarray, np.ndarray]:
    """D and its exact derivative d = gelu_tanh − gelu on the grid 0, h, …, 10 (5,121 points, built once)."""
    x = np.arange(int(round(TANH_CUT / TANH_TABLE_H)) + 1) * TANH_TABLE_H
    return _tanh_difference_quadrature(x), _gelu_tanh(x) - _gelu_erf(x)


def _tanh_difference(a: np.ndarray) -> np.ndarray:
    """D(a) by cubic Hermite interpolation of the table (values and exact slopes): D is odd (d is even, since
    gelu(−x) = gelu(x) − x for both forms) and constant beyond |a| = 10. About 100× cheaper than the quadrature
    per value (gemma3's explain spent 13 s per layer in it at n = 64); tested against it to 1e-13 of I(a)'s scale."""
    a = np.asarray(a, dtype=np.float64)
    D, d = _tanh_table()
    h = TANH_TABLE_H
    b = np.minimum(np.abs(a), TANH_CUT)
    k = np.minimum((b / h).astype(np.int64), D.size - 2)
    t = b / h - k
    t2, t3 = t * t, t * t * t
    out = (
        (2 * t3 - 3 * t2 + 1) * D[k]
        + (t3 - 2 * t2 + t) * h * d[k]
        + (3 * t2 - 2 * t3) * D[k + 1]
        + (t3 - t2) * h * d[k + 1]
    )
    out = np.sign(a) * out
    # below |a| = 8h, where I(a) ≈ a/4 ≫ D(a) ≈ −6.6e-5·a⁵, D's Taylor series (:data:`TANH_SERIES`): the first
    # interval's interpolant would carry an a² term of 4e-12 of I's scale
    near = np.abs(a) < 8 * h
    if np.any(near):
        out[near] = _tanh_series(a[near])
    return out


# D(a) = c5·a⁵ + c7·a⁷ + c9·a⁹ + O(a¹¹) (d = gelu_tanh − gelu is even and O(x⁴): the tanh form matches erf's slope
# at 0; the coefficients from sympy's series of (x/2)(tanh(√(2/π)(x + 0.044715x³)) − erf(x/√2)), integrated; the
# next, c11 = 2.1e-7, adds below 1e-22 of I's scale at |a| < 8h: tests/unit/test_gate_integrals.py rederives them)
TANH_SERIES = (-6.5819422119823572722e-5, 3.2571442318668582348e-5, -6.1889709814023396862e-6)


def _tanh_series(a: np.ndarray) -> np.ndarray:
    c5, c7, c9 = TANH_SERIES
    a2 = a * a
    return a2 * a2 * a * (c5 + a2 * (c7 + a2 * c9))


def _gelu_tanh_integral(a: np.ndarray) -> np.ndarray:
    """∫_0^a gelu_tanh = ∫_0^a gelu (closed form) + D(a), D = ∫_0^a (gelu_tanh − gelu) from a tabulated quadrature
    (:func:`_tanh_difference`)."""
    return _gelu_integral(a) + _tanh_difference(a)


IG_TABLE_H = 1.0 / 256  # the compiled kernels' knots on |a| ∈ [0, 10]: quintic Hermite error < 1e-13 of I(a) (tested)


def _gate_slope(x: np.ndarray, tanh: bool) -> np.ndarray:
    """g′(x) of GELU-tanh or GELU, float64."""
    if not tanh:
        from scipy.special import ndtr

        return ndtr(x) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    k, c = np.sqrt(2 / np.pi), 0.044715
    th = np.tanh(k * (x + c * x**3))
    return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * k * (1 + 3 * c * x * x)


@functools.lru_cache(maxsize=2)
def ig_table(tanh: bool) -> tuple[np.ndarray, float, float]:
    """The compiled kernels' table of I(a) = ∫₀¹g(t·a)dt for GELU-tanh (``tanh``) or GELU: ([2, N, 3] float64: for
    side 0 (a = y > 0) and side 1 (a = −y), per knot y_k = k·h of [0, 10], I, h·dI/dy and h²·d²I/dy², read by quintic
    Hermite interpolation), S(10), S(−10) (S(a) = ∫₀^a g). I from the reference formulas (GELU's closed form; the
    tanh difference D by its 640-node quadrature, not its own table); I′ = (g − I)/a and I″ = (g′ − 2I′)/a (from
    a·I = S), with their limits g′(0)/2 = 1/4 and g″(0)/3 = √(2/π)/3 at a = 0. Built once (about 10 ms)."""
    y = np.arange(int(round(TANH_CUT / IG_TABLE_H)) + 1) * IG_TABLE_H
    h = IG_TABLE_H
    table = np.empty((2, y.size, 3))
    ends = []
    for side, sign in ((0, 1.0), (1, -1.0)):
        a = sign * y
        s = _gelu_integral(a) + (_tanh_difference_quadrature(a) if tanh else 0.0)
        g = _gelu_tanh(a) if tanh else _gelu_erf(a)
        safe = np.where(a == 0, 1.0, a)
        i0 = np.where(a == 0, 0.0, s / safe)
        i1 = np.where(a == 0, 0.25, (g - i0) / safe)
        i2 = np.where(a == 0, np.sqrt(2 / np.pi) / 3, (_gate_slope(a, tanh) - 2 * i1) / safe)
        table[side] = np.stack([i0, h * sign * i1, h * h * i2], 1)  # derivatives along y = |a|
        ends.append(float(s[-1]))
    return table, ends[0], ends[1]


GATES = ("silu", "gelu", "gelu_tanh")  # gated FF activations whose path integral is known


def gate_kind(act) -> str | None:
    """Which of :data:`GATES` the activation module is (probed numerically), or None."""
    probe = torch.linspace(-6, 6, 25, dtype=torch.float64)
    got = act(probe)
    x = probe.numpy()
    refs = {"silu": x / (1 + np.exp(-x)), "gelu": _gelu_erf(x), "gelu_tanh": _gelu_tanh(x)}
    for name, ref in refs.items():
        if np.allclose(got.numpy(), ref, atol=1e-12, rtol=1e-12):
            return name
    return None


class ClampedGLU:
    """GPT-OSS's gate g(a) = c·σ(α·c), c = min(a, L) (a SiLU of slope α, the gate clamped from above at L), and its
    up value clamp(b − o, −L, L) + o: the up projection's bias carries the offset o (+1), folded in by
    :func:`normviz.models.params.layer_params`, so that b is linear in the FF input until the clamp.

    Integrated gradients: I(a) = ∫_0^1 g(t·a) dt = I_silu(α·a)/α for a ≤ L, and (L·I(L) + (a − L)·g(L))/a above
    (the gate is constant past L). Where the up's clamp binds, its value K differs from b: the up parts are scaled
    by K/b at the real b (:func:`normviz.methods.feedforward.unit_factors`), a frozen per-unit factor like a norm's
    real scale."""

    def __init__(self, alpha: float, limit: float, offset: float = 1.0):
        self.alpha, self.limit, self.offset = float(alpha), float(limit), float(offset)

    def __call__(self, a: torch.Tensor) -> torch.Tensor:
        c = a.clamp(max=self.limit)
        return c * torch.sigmoid(c * self.alpha)

    def up_value(self, b: torch.Tensor) -> torch.Tensor:
        """The up unit's real value K(b) for its pre-activation b (the offset already in b)."""
        return (b - self.offset).clamp(-self.limit, self.limit) + self.offset

    def path_integral(self, a: torch.Tensor) -> torch.Tensor:
        """∫_0^1 g(t·a) dt (module docstring)."""
        lim = torch.tensor(self.limit, dtype=a.dtype, device=a.device)
        below = silu_path_integral(self.alpha * a.clamp(max=self.limit)) / self.alpha
        at_lim = silu_path_integral(self.alpha * lim[None])[0] / self.alpha
        safe = torch.where(a > lim, a, torch.ones_like(a))
        above = (lim * at_lim + (a - lim) * self(lim[None])[0]) / safe
        return torch.where(a > lim, above, below)

    def __repr__(self) -> str:
        return f"ClampedGLU(alpha={self.alpha}, limit={self.limit}, offset={self.offset})"


def path_integral(act, a: torch.Tensor, kind: str | None = None) -> torch.Tensor:
    """I(a) = ∫_0^1 g(t·a) dt for a gated FF's activation g (:data:`GATES`): SiLU by the dilogarithm, GELU in
    closed form, GELU-tanh by GELU's closed form plus a quadrature of the difference (:func:`_gelu_tanh_integral`);
    an activation with its own ``path_integral`` (:class:`ClampedGLU`) by that."""
    if hasattr(act, "path_integral"):
        return act.path_integral(a)
    kind = kind or gate_kind(act)
    if kind == "silu":
        return silu_path_integral(a)
    if kind not in ("gelu", "gelu_tanh"):
        raise ValueError(f"no path integral for the activation {type(act).__name__}")
    an = a.detach().to("cpu", torch.float64).numpy()
    out = _compiled_gelu(an, kind == "gelu_tanh")
    if out is None:
        s = _gelu_integral(an) if kind == "gelu" else _gelu_tanh_integral(an)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.where(an == 0, 0.0, s / np.where(an == 0, 1.0, an))
    return torch.from_numpy(out).to(device=a.device, dtype=a.dtype)


COMPILED = True  # the GELU path integrals by the numba kernels where numba runs (tests switch it off to compare)
PARALLEL_FROM = 1 << 16  # values per thread, at least: longer arrays are split over torch's threads
_COMPILED_FAILED = False


def _compiled(name: str, tanh: bool, *arrays) -> bool:
    """Run kernel ``name`` of :mod:`normviz.core.compiled_activations` on ``arrays`` (its inputs, the gate's table
    and constants inserted after them (:func:`ig_table`), then the rest): one pass per value (several times less CPU
    than the numpy version's temporaries). False where numba is missing or fails (a one-time warning): numpy runs."""
    global _COMPILED_FAILED
    if not COMPILED or _COMPILED_FAILED or importlib.util.find_spec("numba") is None:
        return False
    try:
        from . import compiled_activations

        table, s_pos, s_neg = ig_table(tanh)
        k = 1 if name == "gelu_path_integrals" else 2  # the kernel's inputs, then the constants, then the rest
        head, tail = arrays[:k], arrays[k:]
        kernel = getattr(compiled_activations, name)
        consts = (tanh, table, 1.0 / IG_TABLE_H, TANH_CUT, s_pos, s_neg)
        size = head[0].size
        parts = min(torch.get_num_threads(), size // PARALLEL_FROM) if size >= 2 * PARALLEL_FROM else 1
        if parts <= 1:
            kernel(*head, *consts, *tail)
            return True
        # the kernel holds no GIL (nogil): slices of the flat arrays in torch's number of threads
        bounds = np.linspace(0, size, parts + 1).astype(np.int64)

        def piece(k: int) -> None:
            cut = slice(bounds[k], bounds[k + 1])
            kernel(*(x[cut] for x in head), *consts, *(x[cut] if isinstance(x, np.ndarray) else x for x in tail))

        list(_pool(parts).map(piece, range(parts)))
        return True
    except Exception as exc:  # pragma: no cover - e.g. a numba cache directory that can't be read or written
        _COMPILED_FAILED = True
        warnings.warn(
            f"normviz: compiled GELU integrals unavailable ({exc}); using numpy.", RuntimeWarning, stacklevel=3
        )
        return False


_POOLS: dict[int, concurrent.futures.ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()


def _pool(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    """One lasting pool per size (starting threads per call cost gemma3's explain 0.1 s of CPU at n = 64)."""
    with _POOLS_LOCK:
        pool = _POOLS.get(workers)
        if pool is None:
            pool = _POOLS[workers] = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="normviz-gelu")
        return pool


def _compiled_gelu(an: np.ndarray, tanh: bool) -> np.ndarray | None:
    """I(a) of GELU (``tanh``: GELU-tanh) by the kernel, or None (:func:`_compiled`)."""
    flat = np.ascontiguousarray(an, dtype=np.float64).reshape(-1)
    out = np.empty_like(flat)
    return out.reshape(np.shape(an)) if _compiled("gelu_path_integrals", tanh, flat, out) else None


def gate_factors(act, a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor] | None:
    """A GELU or GELU-tanh gated unit g(a)·b's integrated-gradients factors [b·I1(a), I2(a)] (in a's dtype) from
    its real gate and up pre-activations a, b [rows, d_ff] on the CPU, by one compiled pass per value: I2 =
    ∫₀¹g(t·a)dt (:func:`path_integral`), I1 = ∫₀¹t·g′(t·a)dt = (g(a) − I2)/a (g′(0)/2 at a = 0), in float64.
    None for any other gate, device or where numba does not run: :func:`normviz.methods.feedforward.unit_factors`
    then computes the same with torch and numpy."""
    if a.device.type != "cpu" or hasattr(act, "path_integral") or hasattr(act, "up_value"):
        return None
    if a.dtype not in (torch.float32, torch.float64) or b.dtype != a.dtype:
        return None
    kind = gate_kind(act)
    if kind not in ("gelu", "gelu_tanh"):
        return None
    an, bn = a.detach().contiguous().reshape(-1).numpy(), b.detach().contiguous().reshape(-1).numpy()
    gate, up = np.empty_like(an), np.empty_like(an)
    if not _compiled("gelu_gate_factors", kind == "gelu_tanh", an, bn, half_slope(act), gate, up):
        return None
    return [torch.from_numpy(gate).view(a.shape), torch.from_numpy(up).view(a.shape)]


def half_slope(act) -> float:
    """g′(0)/2: ∫_0^1 t·g′(0) dt, the gate factor at a = 0 (SiLU and the GELUs: 1/4)."""
    h = 1e-4
    probe = torch.tensor([h, -h], dtype=torch.float64)
    return float((act(probe)[0] - act(probe)[1]) / (2 * h)) / 2


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
    zero = float(act(torch.zeros(1, dtype=torch.float64))[0])
    if abs(zero) > 1e-12:
        return f"activation {type(act).__name__} has g(0) = {zero} ≠ 0"
    if gated and gate_kind(act) is None and not hasattr(act, "path_integral"):
        return f"gated FF with activation {type(act).__name__}: only SiLU, GELU and GELU-tanh gates are decomposed"
    return None
