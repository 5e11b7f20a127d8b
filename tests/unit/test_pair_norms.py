"""The norm family's kernels on random arrays: the compiled kernels, the torch version and per-pair vectors
built explicitly agree (the model-level checks are in tests/models/test_norm_family.py)."""
import numpy as np
import pytest
import torch

from normviz.methods.norms import kernels
from normviz.methods.norms.pair_norms import doubled_upper, pair_norms_torch

needs_kernel = pytest.mark.skipif(not kernels.available(), reason="numba is not installed")
TOL = {torch.float64: 1e-12, torch.float32: 3e-6}


def _problem(L=2, H=5, n=9, d=11, dtype=torch.float64, seed=0):
    """Random α, head vectors f, residual x and γ for L layers, with the expected maps built from vectors."""
    g = torch.Generator().manual_seed(seed)
    alpha = torch.softmax(torch.randn(L, H, n, n, generator=g, dtype=torch.float64), -1)
    f = torch.randn(L, H, n, d, generator=g, dtype=torch.float64)
    x = torch.randn(L, n, d, generator=g, dtype=torch.float64)
    gamma = torch.rand(L, d, generator=g, dtype=torch.float64) + 0.5
    u = torch.einsum("lhij,lhjd->lijd", alpha, f)  # Σ_h α^h_ij f^h_j
    e = torch.cat([f.transpose(1, 2), x[:, :, None]], dim=2)  # [L, n, H+1, d]
    want = {
        "pairs": u.norm(dim=-1),
        "pairs_weighted": (u * gamma[:, None, None]).norm(dim=-1),
        "norm": alpha * f.norm(dim=-1)[:, :, None, :],
        "plain": e @ e.transpose(-1, -2),
        "weighted": (e * gamma[:, None, None]) @ (e * gamma[:, None, None]).transpose(-1, -2),
        "centred": ((e - e.mean(-1, keepdim=True)) * gamma[:, None, None])
        @ ((e - e.mean(-1, keepdim=True)) * gamma[:, None, None]).transpose(-1, -2),
    }
    cast = lambda t: t.to(dtype)  # noqa: E731
    return cast(alpha), cast(f), cast(x), cast(gamma), {k: cast(v) for k, v in want.items()}


def _close(got, want, dtype):
    tol = TOL[dtype]
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * float(want.abs().max()))


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("centre", [True, False])
def test_span_grams_kernel(dtype, centre):
    alpha, f, x, gamma, want = _problem(dtype=dtype)
    L, H, n, d = f.shape
    plain = torch.empty(L, n, H + 1, H + 1, dtype=dtype)
    weighted = torch.empty_like(plain)
    assert kernels.run("span_grams", f.numpy(), x.numpy(), (gamma * gamma).numpy(), centre, plain.numpy(),
                       weighted.numpy())
    _close(plain, want["plain"], dtype)
    _close(weighted, want["centred" if centre else "weighted"], dtype)


@needs_kernel
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("with_norm", [True, False])
def test_pair_norms_kernel(dtype, with_norm):
    alpha, f, x, gamma, want = _problem(dtype=dtype)
    L, H, n, d = f.shape
    grams = [want["plain"][..., :H, :H], want["weighted"][..., :H, :H]]
    gram2 = torch.stack([doubled_upper(g) for g in grams], dim=1).contiguous()
    scale = torch.rand(L, 2, n, dtype=dtype) + 0.5
    out0, out1 = torch.empty(L, n, n, dtype=dtype), torch.empty(L, n, n, dtype=dtype)
    norm_out = torch.full((L, H, n, n), -1.0, dtype=dtype)
    fnorm = f.norm(dim=-1).contiguous()
    assert kernels.run("pair_norms", alpha.numpy(), gram2.numpy(), scale.numpy(), out0.numpy(), out1.numpy(),
                       fnorm.numpy(), norm_out.numpy(), with_norm)
    _close(out0, want["pairs"] * scale[:, 0, :, None], dtype)
    _close(out1, want["pairs_weighted"] * scale[:, 1, :, None], dtype)
    if with_norm:
        _close(norm_out, want["norm"], dtype)
    else:
        assert bool((norm_out == -1).all())  # untouched


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_pair_norms_torch(dtype):
    alpha, f, x, gamma, want = _problem(dtype=dtype)
    H, n = f.shape[1], f.shape[2]
    out = torch.empty(n, n, dtype=dtype)
    scale = torch.rand(n, dtype=dtype) + 0.5
    pair_norms_torch(alpha[1], want["weighted"][1, :, :H, :H], scale, out)
    _close(out, want["pairs_weighted"][1] * scale[:, None], dtype)
