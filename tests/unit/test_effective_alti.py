"""Effective attention (Brunner et al. 2020) and ALTI (Ferrando et al. 2022) on hand-worked arrays."""

from __future__ import annotations

import numpy as np
import torch

from normviz.methods.effective import effective_attention, effective_attention_causal
from normviz.methods.interactions import alti_layer


# ---------------------------------------------------------------- effective attention
def test_effective_attention_by_hand():
    """Three tokens, one head, T of rank 1: T = [[1,0],[1,0],[0,0]] has column space span(1,1,0)/√2,
    so α = [.5,.3,.2] becomes its projection ((.5+.3)/2)·(1,1,0) = [.4,.4,0]; α·T = [.8,0] is unchanged."""
    t = torch.tensor([[[1.0, 0], [1, 0], [0, 0]]], dtype=torch.float64)
    alpha = torch.tensor([[[0.5, 0.3, 0.2], [1, 0, 0], [0, 0, 1]]], dtype=torch.float64)
    out = effective_attention(alpha, t)
    np.testing.assert_allclose(out[0, 0], [0.4, 0.4, 0], atol=1e-15)
    np.testing.assert_allclose(out[0, 1], [0.5, 0.5, 0], atol=1e-15)
    np.testing.assert_allclose(out[0, 2], [0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(out @ t, alpha @ t, atol=1e-15)


def test_rank_tolerance_is_relative():
    """A singular value 1e-20 below a huge one is numerically zero; the same matrix scaled by 1e-30 gives the
    same answer (an absolute epsilon would call every singular value zero)."""
    t = torch.tensor([[[1.0, 0], [0, 1e-20], [0, 0]]], dtype=torch.float64)
    alpha = torch.tensor([[[0.2, 0.3, 0.5]]], dtype=torch.float64).expand(1, 3, 3).contiguous()
    a = effective_attention(alpha, t)
    b = effective_attention(alpha, t * 1e-30)
    np.testing.assert_allclose(a, b, atol=1e-15)
    np.testing.assert_allclose(a[0, 0], [0.2, 0, 0], atol=1e-15)


def test_causal_rows_project_on_their_prefix():
    rng = np.random.default_rng(0)
    t = torch.tensor(rng.normal(size=(2, 7, 5)) @ rng.normal(size=(5, 9)) / 3)  # rank ≤ 5 ("head size" 5)
    alpha = torch.tensor(np.tril(rng.random((2, 7, 7))))
    alpha = alpha / alpha.sum(-1, keepdim=True)
    out = effective_attention_causal(alpha, t)
    for i in range(7):
        m = i + 1
        u, s, _ = np.linalg.svd(t[:, :m].numpy(), full_matrices=False)
        for h in range(2):
            r = int((s[h] > max(m, 9) * np.finfo(float).eps * s[h, 0]).sum())
            expected = alpha[h, i, :m].numpy() @ u[h, :, :r] @ u[h, :, :r].T
            np.testing.assert_allclose(out[h, i, :m], expected, atol=1e-12)
            assert np.all(out[h, i, m:].numpy() == 0)


# ---------------------------------------------------------------- ALTI


class _Ctx:
    """The minimum of a LayerDecomposition that alti_layer reads: given parts and bias."""

    def __init__(self, parts, bias):
        self.parts, self.bias = parts, bias
        self.n = parts.shape[0]
        self.dtype = self.acc = parts.dtype
        self.device = parts.device

    def row_chunks(self):
        yield slice(0, self.n)

    def attn_res_ln_vectors(self, rows):
        return self.parts[rows], self.bias[rows]


def test_alti_by_hand():
    """Row 0 with parts T(x_0) = (2,0), T(x_1) = (0,1), T(x_2) = (-1,0) and bias (0,0): y = (1,1), ‖y‖₁ = 2;
    ‖y − T(x_j)‖₁ = 2, 1, 3 → c = (0, 1, max(0, −1) = 0) → [0, 1, 0].
    Row 1 with parts (1,1), (1,0), (0,0) and bias (0,1): y = (2,2), ‖y‖₁ = 4; distances 2, 3, 4 → c = (2,1,0)
    → [2/3, 1/3, 0]. Row 2 with every part zero: c = 0 everywhere → the row stays 0."""
    parts = torch.tensor(
        [[[2.0, 0], [0, 1], [-1, 0]], [[1, 1], [1, 0], [0, 0]], [[0, 0], [0, 0], [0, 0]]], dtype=torch.float64
    )
    bias = torch.tensor([[0.0, 0], [0, 1], [1, 1]], dtype=torch.float64)
    out = alti_layer(_Ctx(parts, bias))
    np.testing.assert_allclose(out, [[0, 1, 0], [2 / 3, 1 / 3, 0], [0, 0, 0]], atol=1e-15)
