"""The numba source of :mod:`.kernels` (see there for what each kernel computes), at module level.

They were defined inside a function, so ``pair_norms_fused`` reached ``_pair_block``/``_diag_block`` as closure
variables, which numba's on-disk cache hashes by their pickled bytes: those differ in every process, so every
process missed the cache and compiled the kernel again (about 5 s of CPU, under the kernels' lock: every visitor
of a fresh app server waited), and the cache index grew by one entry per process. At module level they are
globals, resolved by name, and one compiled copy is loaded from the cache by every process.
Imported (and numba with it) only when a kernel is first used.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(parallel=True, fastmath=True, cache=True, nogil=True)
def span_grams_packed(f, x, z, gamma2, centre, eps, gram, gx, fnorm, inv_s):  # pragma: no cover - compiled
    # The per-token Grams of [f^1_j … f^H_j, x_j], laid out for pair_norms_fused, plus what it needs per token.
    # f [L, H, n, d], x [L, n, d], z [L, n, d] (the real input of the norm), gamma2 [L, d]. Writes
    #   gram [L, 2, Hp, Hp, n]  stage 0 plain, 1 weighted (centred for LayerNorm); j last; entry (a, b),
    #                           a ≤ b < H: G_ab (a = b) or 2 G_ab (a < b); heads H ≤ a or b < Hp: 0
    #                           (Hp = H rounded up to 4); a > b: not written
    #   gx [L, 2, H + 1, n]     2 G_aH (a < H) and G_HH: the residual's terms
    #   fnorm [L, H, n]         ‖f^a_j‖ = sqrt(plain G_aa)
    #   inv_s [L, n]            1 / s_j, s_j = sqrt(Var(z_j) + eps) (centre) or sqrt(mean(z_j²) + eps)
    L, H, n, d = f.shape
    Hp = gram.shape[2]
    K = H + 1
    zero = gamma2.dtype.type(0)
    one = gamma2.dtype.type(1)
    two = gamma2.dtype.type(2)
    eps_ = gamma2.dtype.type(eps)  # in the working dtype, as torch adds it
    dd = gamma2.dtype.type(d)
    for lj in numba.prange(L * n):
        l = lj // n
        j = lj - l * n
        g2 = gamma2[l]
        gsum = zero
        for k in range(d):
            gsum += g2[k]
        zr = z[l, j]
        zm = zero
        for k in range(d):
            zm += zr[k]
        zm = zm / dd
        zv = zero
        if centre:
            for k in range(d):
                zv += (zr[k] - zm) * (zr[k] - zm)
        else:
            for k in range(d):
                zv += zr[k] * zr[k]
        inv_s[l, j] = one / np.sqrt(zv / dd + eps_)
        sw = np.empty(K, dtype=gamma2.dtype)
        sm = np.empty(K, dtype=gamma2.dtype)
        for a in range(K):
            ra = f[l, a, j] if a < H else x[l, j]
            accw = zero
            acc = zero
            for k in range(d):
                accw += g2[k] * ra[k]
                acc += ra[k]
            sw[a] = accw
            sm[a] = acc / d
        for a in range(K):
            ra = f[l, a, j] if a < H else x[l, j]
            for b in range(a, K):
                rb = f[l, b, j] if b < H else x[l, j]
                acc = zero
                accw = zero
                for k in range(d):
                    prod = ra[k] * rb[k]
                    acc += prod
                    accw += g2[k] * prod
                if centre:
                    accw = accw - sm[a] * sw[b] - sm[b] * sw[a] + sm[a] * sm[b] * gsum
                if b < H:
                    c = one if a == b else two
                    gram[l, 0, a, b, j] = c * acc
                    gram[l, 1, a, b, j] = c * accw
                    if a == b:
                        fnorm[l, a, j] = np.sqrt(max(acc, zero))
                else:
                    c = two if a < H else one
                    gx[l, 0, a, j] = c * acc
                    gx[l, 1, a, j] = c * accw
        for a in range(Hp):
            for b in range(max(a, H), Hp):
                gram[l, 0, a, b, j] = zero
                gram[l, 1, a, b, j] = zero

opts = dict(fastmath={"contract"}, cache=True, nogil=True)

@numba.njit(**opts)
def _diag_block(x0, x1, x2, x3, g00, g01, g02, g03, g11, g12, g13, g22, g23, g33, q):  # pragma: no cover
    # q_j += Σ_{a ≤ b} g_ab[j] x_a[j] x_b[j] over one block of 4 heads (off-diagonal g doubled)
    for j in range(q.shape[0]):
        u0 = x0[j]
        u1 = x1[j]
        u2 = x2[j]
        u3 = x3[j]
        t0 = g00[j] * u0
        t1 = g01[j] * u0 + g11[j] * u1
        t2 = g02[j] * u0 + g12[j] * u1 + g22[j] * u2
        t3 = g03[j] * u0 + g13[j] * u1 + g23[j] * u2 + g33[j] * u3
        q[j] += t0 * u0 + t1 * u1 + t2 * u2 + t3 * u3

@numba.njit(**opts)
def _pair_block(x0, x1, x2, x3, y0, y1, y2, y3, c0, c1, c2, c3, q):  # pragma: no cover
    # q_j += Σ_b y_b[j] Σ_a g_ab[j] x_a[j] for two blocks of 4 heads; c_a = g[a, block b] ([4, n] each)
    for j in range(q.shape[0]):
        u0 = x0[j]
        u1 = x1[j]
        u2 = x2[j]
        u3 = x3[j]
        t0 = c0[0, j] * u0 + c1[0, j] * u1 + c2[0, j] * u2 + c3[0, j] * u3
        t1 = c0[1, j] * u0 + c1[1, j] * u1 + c2[1, j] * u2 + c3[1, j] * u3
        t2 = c0[2, j] * u0 + c1[2, j] * u1 + c2[2, j] * u2 + c3[2, j] * u3
        t3 = c0[3, j] * u0 + c1[3, j] * u1 + c2[3, j] * u2 + c3[3, j] * u3
        q[j] += t0 * y0[j] + t1 * y1[j] + t2 * y2[j] + t3 * y3[j]

@numba.njit(parallel=True, fastmath={"contract"}, cache=True, nogil=True)
def pair_norms_fused(alpha, gram, gx, fnorm, inv_s, norm_out, layer_out, res_out, ln_out,
                     with_norm, with_layer, with_res, with_ln):  # pragma: no cover - compiled
    # Every α-sized output of the norm family in one pass over α, rows i in parallel, j innermost (α's own
    # layout, vectorised over j). alpha [L, H, n, n]; gram, gx, fnorm, inv_s from span_grams_packed.
    #   norm_out[l, h, i, j] = α^h_ij ‖f^h_j‖                                   (with_norm)
    #   layer_out[l, i, j]   = sqrt(q0), q0 = α_ijᵀ G_j α_ij over the heads (plain Gram)   (with_layer)
    #   res_out[l, i, j]     = the same off the diagonal; at i = j, q0 + the residual's terms  (with_res)
    #   ln_out[l, i, j]      = sqrt(q1) / s_i with the weighted Gram, residual on the diagonal  (with_ln)
    # q = Σ over blocks of 4 heads: a diagonal block adds Σ_{a≤b} g_ab α_a α_b, a pair of blocks A < B adds
    # Σ_b α_b Σ_a g_ab α_a; padding heads (≥ H) read the last head's α against g = 0 and add exact zeros.
    L, H, n, _ = alpha.shape
    Hp = gram.shape[2]
    nb = Hp // 4
    zero = alpha.dtype.type(0)
    for li in numba.prange(L * n):
        l = li // n
        i = li - l * n
        if with_norm:
            for h in range(H):
                a = alpha[l, h, i]
                fn = fnorm[l, h]
                o = norm_out[l, h, i]
                for j in range(n):
                    o[j] = a[j] * fn[j]
        q = np.empty(n, dtype=alpha.dtype)
        for s in range(2):
            if (s == 0 and (with_layer or with_res)) or (s == 1 and with_ln):
                g = gram[l, s]
                q[:] = zero
                for A in range(nb):
                    x0 = alpha[l, min(4 * A, H - 1), i]
                    x1 = alpha[l, min(4 * A + 1, H - 1), i]
                    x2 = alpha[l, min(4 * A + 2, H - 1), i]
                    x3 = alpha[l, min(4 * A + 3, H - 1), i]
                    a0 = 4 * A
                    _diag_block(x0, x1, x2, x3, g[a0, a0], g[a0, a0 + 1], g[a0, a0 + 2], g[a0, a0 + 3],
                                g[a0 + 1, a0 + 1], g[a0 + 1, a0 + 2], g[a0 + 1, a0 + 3], g[a0 + 2, a0 + 2],
                                g[a0 + 2, a0 + 3], g[a0 + 3, a0 + 3], q)
                    for B in range(A + 1, nb):
                        b0 = 4 * B
                        _pair_block(x0, x1, x2, x3, alpha[l, min(b0, H - 1), i], alpha[l, min(b0 + 1, H - 1), i],
                                    alpha[l, min(b0 + 2, H - 1), i], alpha[l, min(b0 + 3, H - 1), i],
                                    g[a0, b0:b0 + 4], g[a0 + 1, b0:b0 + 4], g[a0 + 2, b0:b0 + 4],
                                    g[a0 + 3, b0:b0 + 4], q)
                # the diagonal pair (i, i): the residual x_i enters, c = (α^1_ii … α^H_ii, 1)
                qd = q[i] + gx[l, s, H, i]
                for h in range(H):
                    qd += gx[l, s, h, i] * alpha[l, h, i, i]
                if s == 0:
                    if with_layer:
                        o = layer_out[l, i]
                        for j in range(n):
                            o[j] = np.sqrt(max(q[j], zero))
                    if with_res:
                        o = res_out[l, i]
                        for j in range(n):
                            o[j] = np.sqrt(max(q[j], zero))
                        o[i] = np.sqrt(max(qd, zero))
                else:
                    c = inv_s[l, i]
                    o = ln_out[l, i]
                    for j in range(n):
                        o[j] = c * np.sqrt(max(q[j], zero))
                    o[i] = c * np.sqrt(max(qd, zero))
