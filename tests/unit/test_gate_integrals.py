"""Issue 38: the path integrals I(a) = ∫₀¹ g(t·a) dt of the gated FF activations (SiLU by the dilogarithm, GELU in
closed form, GELU-tanh by GELU's closed form plus a Gauss–Legendre quadrature of the difference) against adaptive
quadrature of the module itself (scipy.integrate.quad, error estimate ≤ 1e-13 relative), and the activation probe."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.integrate import quad
from transformers.activations import ACT2FN

from normviz.core.activations import check_activation, gate_kind, path_integral

POINTS = np.concatenate([-np.logspace(-8, 2.5, 40), [0.0], np.logspace(-8, 2.5, 40)])


@pytest.mark.parametrize(
    "name,kind", [("silu", "silu"), ("gelu", "gelu"), ("gelu_pytorch_tanh", "gelu_tanh"), ("gelu_new", "gelu_tanh")]
)
def test_path_integral_equals_quadrature(name, kind):
    act = ACT2FN[name]
    assert gate_kind(act) == kind
    assert check_activation(act, gated=True) is None
    got = path_integral(act, torch.tensor(POINTS, dtype=torch.float64)).numpy()

    def g(x):
        return float(act(torch.tensor([x], dtype=torch.float64))[0])

    worst = 0.0
    for a, value in zip(POINTS, got):
        if a == 0:
            assert value == 0.0
            continue
        # ∫₀^a g / a, split where g stops bending (|x| = 8): each piece smooth for the adaptive rule
        cut = float(np.clip(a, -8.0, 8.0))
        ref, err = quad(g, 0.0, cut, epsabs=1e-15, epsrel=1e-14, limit=200)
        if cut != a:
            more, err2 = quad(g, cut, a, epsabs=1e-15, epsrel=1e-14, limit=200)
            ref, err = ref + more, err + err2
        ref, err = ref / a, err / abs(a)
        assert err <= 1e-13 * max(1.0, abs(ref))
        worst = max(worst, abs(value - ref) / max(abs(ref), 1e-300))
    assert worst <= 1e-11, worst  # the bound the FF split's completeness rests on


def test_relu_is_no_gate():
    assert gate_kind(ACT2FN["relu"]) is None
    assert "only SiLU, GELU and GELU-tanh" in check_activation(ACT2FN["relu"], gated=True)


@pytest.mark.parametrize("limit", [7.0, 1.5])
def test_clamped_glu_path_integral_equals_quadrature(limit):
    """GPT-OSS's gate min(a, L)·σ(1.702·min(a, L)): I(a) in closed form below and above the clamp."""
    from normviz.core.activations import ClampedGLU

    act = ClampedGLU(1.702, limit)
    assert check_activation(act, gated=True) is None
    got = path_integral(act, torch.tensor(POINTS, dtype=torch.float64)).numpy()
    worst = 0.0
    for a, value in zip(POINTS, got):
        if a == 0:
            assert value == 0.0
            continue
        pieces = sorted({0.0, a, *(x for x in (limit, -8.0, 8.0) if min(0.0, a) < x < max(0.0, a))})
        ref = sum(
            quad(
                lambda x: float(act(torch.tensor([x], dtype=torch.float64))[0]),
                lo,
                hi,
                epsabs=1e-15,
                epsrel=1e-14,
                limit=200,
            )[0]
            for lo, hi in zip(pieces, pieces[1:])
        )
        ref = (ref if a > 0 else -ref) / a
        worst = max(worst, abs(value - ref) / max(abs(ref), 1e-300))
    assert worst <= 1e-11, worst
    b = torch.tensor([-3.0, 0.5, 1.0, 9.5])
    assert torch.equal(act.up_value(b), torch.tensor([max(-3.0, 1 - limit), 0.5, 1.0, min(9.5, 1 + limit)]))


def test_the_tabulated_tanh_difference_equals_its_quadrature():
    """GELU-tanh's difference D(a) = ∫₀^a (gelu_tanh − gelu) is read from a table by cubic Hermite interpolation
    (exact slopes); against the 640-node quadrature it replaced, at 20,000 random points, the grid's own points,
    midpoints, tiny and huge |a|: within 1e-13 of the path integral's scale (seen: 7e-14 near |a| = 0.02, the
    interpolation's h⁴ term; the FF split's completeness rests on 1e-11) (I(a) = (∫₀^a gelu + D(a)) / a)."""
    from normviz.core.activations import TANH_TABLE_H, _gelu_integral, _tanh_difference, _tanh_difference_quadrature

    rng = np.random.default_rng(0)
    grid = np.arange(0, 10.5, TANH_TABLE_H)
    a = np.concatenate(
        [
            rng.uniform(-12, 12, 20_000),
            grid,
            grid + TANH_TABLE_H / 2,
            -grid - TANH_TABLE_H / 3,
            np.logspace(-8, 0, 50),
            -np.logspace(-8, 3, 50),
            [1e4, -1e4],
        ]
    )
    got, ref = _tanh_difference(a), _tanh_difference_quadrature(a)
    scale = np.abs(_gelu_integral(a) + ref)  # the integral the difference is a part of
    nz = a != 0
    assert np.max(np.abs(got - ref)[nz] / scale[nz]) <= 1e-13
    assert np.max(np.abs(_tanh_difference(-a) + got)[nz] / scale[nz]) <= 1e-13  # odd, as D is


def test_tanh_series_coefficients_are_the_taylor_series():
    """Below |a| = 8h the difference D(a) is its Taylor series c5·a⁵ + c7·a⁷ + c9·a⁹: the coefficients rederived
    symbolically, and the series against the quadrature there (within 1e-15 of I(a)'s scale)."""
    sp = pytest.importorskip("sympy")
    from normviz.core.activations import (
        TANH_SERIES,
        TANH_TABLE_H,
        _gelu_integral,
        _tanh_difference_quadrature,
        _tanh_series,
    )

    x, a = sp.symbols("x a")
    d = x / 2 * (sp.tanh(sp.sqrt(2 / sp.pi) * (x + sp.Rational(44715, 10**6) * x**3)) - sp.erf(x / sp.sqrt(2)))
    poly = sp.Poly(sp.integrate(sp.series(d, x, 0, 12).removeO(), (x, 0, a)), a)
    coeffs = {m: float(c) for (m,), c in poly.terms()}
    assert set(coeffs) == {5, 7, 9, 11}
    assert np.allclose(TANH_SERIES, [coeffs[5], coeffs[7], coeffs[9]], rtol=1e-15, atol=0)
    b = np.concatenate([np.linspace(-8 * TANH_TABLE_H, 8 * TANH_TABLE_H, 401), np.logspace(-8, -2, 20)])
    b = b[b != 0]
    ref = _tanh_difference_quadrature(b)
    scale = np.abs(_gelu_integral(b) + ref)
    assert np.max(np.abs(_tanh_series(b) - ref) / scale) <= 1e-15


@pytest.mark.parametrize("name", ["gelu", "gelu_pytorch_tanh"])
def test_compiled_gelu_kernels_equal_numpy(name):
    """The numba kernels (normviz.core.compiled_activations) against the numpy formulas they compile: I(a) and a
    gated unit's factors [b·I1, I2] (feedforward.unit_factors' torch/numpy path), float32 and float64, at random
    and special points (0, the series' edges |a| = 0.1 and 8h, the table's end 10, beyond)."""
    pytest.importorskip("numba")
    from types import SimpleNamespace

    from normviz.core import activations
    from normviz.methods.feedforward import unit_factors

    act = ACT2FN[name]
    rng = np.random.default_rng(1)
    h = activations.TANH_TABLE_H
    special = np.array([0.0, 0.1, -0.1, 0.0999999, 8 * h, -8 * h, 8 * h * 0.999, 10.0, -10.0, 12.5, -40.0, 1e-9])
    a = np.concatenate([rng.normal(0, 2, 5000), rng.uniform(-0.2, 0.2, 2000), special, POINTS])
    b = rng.normal(0, 1, a.size)
    try:
        for dtype in (torch.float64, torch.float32):
            at, bt = torch.tensor(a, dtype=dtype).reshape(-1, 41), torch.tensor(b, dtype=dtype).reshape(-1, 41)
            ctx = SimpleNamespace(p=SimpleNamespace(act=act), acc=torch.float64, dtype=dtype)
            activations.COMPILED = True
            fast_i = activations.path_integral(act, at.to(torch.float64))
            fast = activations.gate_factors(act, at, bt)
            assert fast is not None and all(f.dtype == dtype for f in fast)
            via = unit_factors(ctx, at, bt)
            activations.COMPILED = False
            slow_i = activations.path_integral(act, at.to(torch.float64))
            slow = unit_factors(ctx, at, bt)
            assert activations.gate_factors(act, at, bt) is None
            scale = slow_i.abs().clamp(min=1e-300)
            assert float(((fast_i - slow_i).abs() / scale).max()) <= 1e-13
            assert torch.equal(fast[0], via[0]) and torch.equal(fast[1], via[1])
            tol = 1e-13 if dtype == torch.float64 else 1.2e-7  # float32: both round one float64 value
            # b·I1 in units of |b| (|I1| ≤ 1.13; g(a) − I2 cancels where I1 crosses 0), I2 relative to itself
            assert float(((fast[0] - slow[0]).abs() - tol * bt.abs()).max()) <= 0
            assert float(((fast[1] - slow[1]).abs() - tol * slow[1].abs()).max()) <= 0
    finally:
        activations.COMPILED = True


def test_compiled_gelu_kernels_split_over_threads_give_the_same_bits(monkeypatch):
    """Arrays longer than PARALLEL_FROM values per thread are cut into slices run in threads: the same numbers."""
    pytest.importorskip("numba")
    from normviz.core import activations

    rng = np.random.default_rng(2)
    a, b = torch.tensor(rng.normal(0, 2, (64, 50))), torch.tensor(rng.normal(0, 1, (64, 50)))
    act = ACT2FN["gelu_pytorch_tanh"]
    monkeypatch.setattr(activations, "PARALLEL_FROM", 1 << 30)
    whole = activations.gate_factors(act, a, b) + [activations.path_integral(act, a)]
    monkeypatch.setattr(activations, "PARALLEL_FROM", 300)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 3)
    split = activations.gate_factors(act, a, b) + [activations.path_integral(act, a)]
    assert all(torch.equal(x, y) for x, y in zip(whole, split))


@pytest.mark.parametrize("name", ["gelu", "gelu_pytorch_tanh"])
def test_compiled_table_equals_the_reference_integrals(name):
    """The compiled kernels read I(a) from a quintic Hermite table (h = 1/256, one per sign of a, values and exact
    first and second derivatives at the knots): against the reference formulas it is built from (GELU's closed
    form; GELU-tanh's difference by its 640-node quadrature, not the difference's own table) at 60,000 random
    points, every interval's middle and off-centre points on both sides, |a| from 1e-12 to 1e3, and the cut at 10:
    within 1e-13 of I(a) itself (seen: 3.8e-14, at |a| ≈ 0.1 where the closed form's cancellation starts)."""
    pytest.importorskip("numba")
    from normviz.core import activations

    rng = np.random.default_rng(3)
    h = activations.IG_TABLE_H
    knots = np.arange(0, 10, h)
    tiny = np.logspace(-12, 3, 3000)
    a = np.concatenate(
        [rng.uniform(-12, 12, 60_000), knots + h / 2, -knots - h / 3, knots + 0.9 * h, -knots - 0.77 * h]
        + [tiny, -tiny, [10.0, -10.0, 10 - 1e-9, -10 + 1e-9, 10 + 1e-9]]
    )
    a = a[a != 0]
    tanh = name == "gelu_pytorch_tanh"
    s = activations._gelu_integral(a) + (activations._tanh_difference_quadrature(a) if tanh else 0.0)
    ref = s / a
    got = activations.path_integral(ACT2FN[name], torch.tensor(a)).numpy()
    assert np.max(np.abs(got - ref) / np.abs(ref)) <= 1e-13
