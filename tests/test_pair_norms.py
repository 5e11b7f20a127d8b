"""The norm family from Gram matrices: the compiled kernels, the torch version and per-pair vectors built
explicitly agree; runs of layers give what single layers give; the analysis is the same on either path."""
import numpy as np
import pytest
import torch

from normviz import kernels, norm_maps
from normviz.analysis import analyze_encoded
from normviz.decompose import LayerDecomposition
from normviz.pair_norms import doubled_upper, pair_norms_torch
from normviz.record import record

from .tiny import encoded, tiny_model

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


def _contexts(arch, n=8, use_kernel=None):
    lm = tiny_model(arch)
    enc = encoded(n)
    ids = torch.tensor([enc.ids])
    recs = record(lm, ids, torch.ones_like(ids))[0]
    return lm, [LayerDecomposition(r, lm.layer_params(i), lm.spec.placement, use_kernel=use_kernel)
                for i, r in enumerate(recs)]


@needs_kernel
@pytest.mark.parametrize("arch", ["bert", "gpt2", "llama"])
def test_kernel_and_torch_paths_agree(arch):
    keys = list(norm_maps.KEYS)
    _, kernel_ctxs = _contexts(arch, use_kernel=None)
    _, torch_ctxs = _contexts(arch, use_kernel=False)
    assert norm_maps.applicable(kernel_ctxs) and not norm_maps.applicable(torch_ctxs)
    for a, b in zip(kernel_ctxs, torch_ctxs):
        got, ref = a.norm_family(keys), b.norm_family(keys)
        for k in keys:
            torch.testing.assert_close(got[k], ref[k], rtol=1e-12, atol=1e-14)


@needs_kernel
def test_run_of_layers_equals_single_layers_and_fills_targets():
    keys = list(norm_maps.KEYS)
    _, ctxs = _contexts("bert")
    single = [c.norm_family(keys) for c in _contexts("bert")[1]]
    L, n, H = len(ctxs), ctxs[0].n, ctxs[0].alpha.shape[0]
    buf = torch.full((n, n, L), -1.0, dtype=torch.float64)
    targets = {"attn_res_ln": buf.permute(2, 0, 1)}  # a strided destination: written through a stand-in
    run = norm_maps.norm_family_run(ctxs, keys, targets=targets)
    for layer in range(L):
        for k in keys:
            torch.testing.assert_close(run[layer][k], single[layer][k], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(targets["attn_res_ln"], torch.stack([s["attn_res_ln"] for s in single]))
    assert run[0]["norm"].shape == (H, n, n)


@needs_kernel
def test_runs_split_by_memory():
    _, ctxs = _contexts("bert")
    per_layer = ctxs[0].alpha.shape[0] * ctxs[0].n * ctxs[0].rec.x.shape[-1] * 8
    assert [s.stop - s.start for s in norm_maps.runs(ctxs, run_bytes=per_layer)] == [1] * len(ctxs)
    assert list(norm_maps.runs(ctxs, run_bytes=1 << 30)) == [slice(0, len(ctxs))]


def test_analysis_without_kernels_is_the_same(monkeypatch):
    lm = tiny_model("llama")
    enc = encoded(7)
    with_kernels = analyze_encoded(lm, [enc], methods=list(norm_maps.KEYS) + ["attention"])[0]
    monkeypatch.setattr(kernels, "available", lambda: False)
    without = analyze_encoded(lm, [enc], methods=list(norm_maps.KEYS) + ["attention"])[0]
    for k in with_kernels.keys():
        np.testing.assert_allclose(with_kernels[k], without[k], rtol=1e-12, atol=1e-14)


def test_kernel_failure_falls_back_to_torch_with_a_warning(monkeypatch):
    """A kernel that can't be built (e.g. an unwritable numba cache) gives a warning and the torch results."""
    lm = tiny_model("bert")
    enc = encoded(6)
    keys = list(norm_maps.KEYS)
    reference = analyze_encoded(lm, [enc], methods=keys)[0]

    def broken():
        raise RuntimeError("cannot cache function")

    monkeypatch.setattr(kernels, "_KERNELS", {})
    monkeypatch.setattr(kernels, "_FAILED", False)
    monkeypatch.setattr(kernels, "_build", broken)
    with pytest.warns(RuntimeWarning, match="compiled kernels unavailable"):
        got = analyze_encoded(lm, [enc], methods=keys)[0]
    assert not kernels.available()
    for k in keys:
        np.testing.assert_allclose(got[k], reference[k], rtol=1e-12, atol=1e-14)
