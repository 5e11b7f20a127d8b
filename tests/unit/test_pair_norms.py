"""The norm family's kernels on random arrays: the compiled kernels, the torch version and per-pair vectors
built explicitly agree (the model-level checks are in tests/models/test_norm_family.py)."""

import pytest
import torch

from normviz.methods.norms import kernels
from normviz.methods.norms.pair_norms import pair_norms_torch

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
@pytest.mark.parametrize("H", [5, 4, 1])  # padded to a multiple of 4 heads inside, or not
def test_fused_kernels_against_per_pair_vectors(dtype, centre, H):
    """span_grams_packed + pair_norms_fused (the path the family runs on CPU) against vectors built explicitly:
    norm = α‖f‖, norm_layer = ‖u_ij‖, attn_res = ‖u_ij + δ_ij x_j‖, attn_res_ln = ‖N(u_ij + δ_ij x_j)‖ / s_i with
    u_ij = Σ_h α^h_ij f^h_j, N = γ⊙centre(·) (LayerNorm) or γ⊙· (RMSNorm), s_i from the norm's real input z_i."""
    alpha, f, x, gamma, _ = _problem(H=H, dtype=torch.float64)
    L, H, n, d = f.shape
    g = torch.Generator().manual_seed(3)
    z = torch.randn(L, n, d, generator=g, dtype=torch.float64)
    eps = 1e-5
    zc = z - z.mean(-1, keepdim=True) if centre else z
    s = (zc.square().mean(-1) + eps).sqrt()  # [L, n]
    v = torch.einsum("lhij,lhjd->lijd", alpha, f) + torch.eye(n, dtype=torch.float64)[None, :, :, None] * x[:, None]
    lin = (v - v.mean(-1, keepdim=True) if centre else v) * gamma[:, None, None]
    u = torch.einsum("lhij,lhjd->lijd", alpha, f)
    want = {
        "norm": alpha * f.norm(dim=-1)[:, :, None, :],
        "norm_layer": u.norm(dim=-1),
        "attn_res": v.norm(dim=-1),
        "attn_res_ln": lin.norm(dim=-1) / s[:, :, None],
    }
    alpha, f, x, z, gamma = (t.to(dtype) for t in (alpha, f, x, z, gamma))
    Hp = -(-H // 4) * 4
    gram, gx = torch.empty(L, 2, Hp, Hp, n, dtype=dtype), torch.empty(L, 2, H + 1, n, dtype=dtype)
    fnorm, inv_s = torch.empty(L, H, n, dtype=dtype), torch.empty(L, n, dtype=dtype)
    assert kernels.run(
        "span_grams_packed",
        f.numpy(),
        x.numpy(),
        z.numpy(),
        (gamma * gamma).numpy(),
        centre,
        eps,
        gram.numpy(),
        gx.numpy(),
        fnorm.numpy(),
        inv_s.numpy(),
    )
    _close(fnorm, f.norm(dim=-1), dtype)
    _close(inv_s, (1 / s).to(dtype), dtype)
    got = {
        "norm": torch.full((L, H, n, n), -1.0, dtype=dtype),
        **{k: torch.empty(L, n, n, dtype=dtype) for k in ("norm_layer", "attn_res", "attn_res_ln")},
    }
    assert kernels.run(
        "pair_norms_fused",
        alpha.contiguous().numpy(),
        gram.numpy(),
        gx.numpy(),
        fnorm.numpy(),
        inv_s.numpy(),
        *(got[k].numpy() for k in ("norm", "norm_layer", "attn_res", "attn_res_ln")),
        True,
        True,
        True,
        True,
    )
    for k, w in want.items():
        _close(got[k], w.to(dtype), dtype)
    # a key not asked for is left untouched
    untouched = torch.full((L, H, n, n), -1.0, dtype=dtype)
    assert kernels.run(
        "pair_norms_fused",
        alpha.contiguous().numpy(),
        gram.numpy(),
        gx.numpy(),
        fnorm.numpy(),
        inv_s.numpy(),
        untouched.numpy(),
        got["norm_layer"].numpy(),
        got["attn_res"].numpy(),
        got["attn_res_ln"].numpy(),
        False,
        True,
        True,
        True,
    )
    assert bool((untouched == -1).all())


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_pair_norms_torch(dtype):
    alpha, f, x, gamma, want = _problem(dtype=dtype)
    H, n = f.shape[1], f.shape[2]
    out = torch.empty(n, n, dtype=dtype)
    scale = torch.rand(n, dtype=dtype) + 0.5
    pair_norms_torch(alpha[1], want["weighted"][1, :, :H, :H], scale, out)
    _close(out, want["pairs_weighted"][1] * scale[:, None], dtype)
