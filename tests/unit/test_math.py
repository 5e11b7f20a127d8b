"""The closed forms behind the FF split, checked against independent numerics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import integrate
from transformers.activations import ACT2FN

from normviz.core.activations import activation_ratio, silu_path_integral


def _silu(x):
    return x / (1 + np.exp(-x))


@pytest.mark.parametrize("a", [-300.0, -45.0, -7.3, -1.0, -1e-3, 0.0, 1e-8, 0.4, 2.0, 9.9, 39.0, 41.0, 500.0])
def test_silu_path_integral_matches_quadrature(a):
    expected = integrate.quad(lambda t: _silu(t * a), 0.0, 1.0, epsabs=1e-15, epsrel=1e-13, limit=500)[0]
    got = float(silu_path_integral(torch.tensor([a], dtype=torch.float64))[0])
    assert abs(got - expected) <= 1e-12 * max(1.0, abs(expected)), (a, got, expected)


def test_gated_ig_is_complete_and_matches_numerical_ig():
    """IG of F(a, b) = silu(a)·b along the straight path from 0, per component, against a Riemann sum."""
    g = torch.Generator().manual_seed(0)
    comps_a = torch.randn(5, dtype=torch.float64, generator=g) * 2
    comps_b = torch.randn(5, dtype=torch.float64, generator=g) * 2
    a, b = comps_a.sum(), comps_b.sum()
    i2 = silu_path_integral(a.reshape(1))[0]
    i1 = (a * torch.sigmoid(a) - i2) / a
    attr = comps_a * b * i1 + comps_b * i2
    assert torch.allclose(attr.sum(), a * torch.sigmoid(a) * b, rtol=1e-13)
    t = (torch.arange(200000, dtype=torch.float64) + 0.5) / 200000  # midpoint rule
    ta = t * a
    dsilu = torch.sigmoid(ta) * (1 + ta * (1 - torch.sigmoid(ta)))
    numeric = comps_a * (dsilu * t * b).mean() + comps_b * (ta * torch.sigmoid(ta)).mean()
    assert torch.allclose(attr, numeric, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("name", ["gelu", "gelu_new", "relu", "silu", "quick_gelu"])
def test_activation_ratio(name):
    act = ACT2FN[name]
    p = torch.tensor([-3.0, -1e-9, 0.0, 1e-9, 2.5], dtype=torch.float64)
    r = activation_ratio(act, p)
    torch.testing.assert_close(r[[0, 4]], act(p[[0, 4]]) / p[[0, 4]])
    slope = {"gelu": 0.5, "gelu_new": 0.5, "relu": 0.5, "silu": 0.5, "quick_gelu": 0.5}[name]
    assert abs(float(r[2]) - slope) < 1e-6  # the limit g'(0) at exactly zero (ReLU: the symmetric slope)
    assert torch.all(torch.isfinite(r))
