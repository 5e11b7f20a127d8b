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


@numba.njit(fastmath=True, cache=True, nogil=True, inline="always")
def _emit(l, j, a, b, H, acc, accw, centre, sm, sw, gsum, gram, gx, fnorm):  # pragma: no cover - compiled
    # entry (a, b), a ≤ b, of token j's plain and weighted Grams, in span_grams_packed's layout
    zero = acc * 0
    if centre:
        accw = accw - sm[a] * sw[b] - sm[b] * sw[a] + sm[a] * sm[b] * gsum
    if b < H:
        c = 1 if a == b else 2
        gram[l, 0, a, b, j] = c * acc
        gram[l, 1, a, b, j] = c * accw
        if a == b:
            fnorm[l, a, j] = np.sqrt(max(acc, zero))
    else:
        c = 2 if a < H else 1
        gx[l, 0, a, j] = c * acc
        gx[l, 1, a, j] = c * accw


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
    # Blocked like a small GEMM: tiles of 2 × 2 entries (a, a+1) × (b, b+1) in one pass over k (5 loads for 4
    # products, each added to the plain sum and, times γ²_k, to the weighted one; one entry at a time: 3 loads
    # per product), each row read once per tile. Per entry the formula of the one-entry loop it replaced.
    L, H, n, d = f.shape
    Hp = gram.shape[2]
    K = H + 1
    zero = gamma2.dtype.type(0)
    one = gamma2.dtype.type(1)
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
            sm[a] = acc / dd
        for a in range(0, K, 2):
            a1 = min(a + 1, K - 1)  # K odd: the last tile's second row is its first again
            x0 = f[l, a, j] if a < H else x[l, j]
            x1 = f[l, a1, j] if a1 < H else x[l, j]
            for b in range(a, K, 2):
                b1 = min(b + 1, K - 1)
                y0 = f[l, b, j] if b < H else x[l, j]
                y1 = f[l, b1, j] if b1 < H else x[l, j]
                p00 = zero
                p01 = zero
                p10 = zero
                p11 = zero
                q00 = zero
                q01 = zero
                q10 = zero
                q11 = zero
                for k in range(d):
                    gk = g2[k]
                    e0 = y0[k]
                    e1 = y1[k]
                    t00 = x0[k] * e0
                    t01 = x0[k] * e1
                    t10 = x1[k] * e0
                    t11 = x1[k] * e1
                    p00 += t00
                    p01 += t01
                    p10 += t10
                    p11 += t11
                    q00 += gk * t00
                    q01 += gk * t01
                    q10 += gk * t10
                    q11 += gk * t11
                _emit(l, j, a, b, H, p00, q00, centre, sm, sw, gsum, gram, gx, fnorm)
                if b1 > b:
                    _emit(l, j, a, b1, H, p01, q01, centre, sm, sw, gsum, gram, gx, fnorm)
                if a1 > a and b >= a1:
                    _emit(l, j, a1, b, H, p10, q10, centre, sm, sw, gsum, gram, gx, fnorm)
                if a1 > a and b1 > b:
                    _emit(l, j, a1, b1, H, p11, q11, centre, sm, sw, gsum, gram, gx, fnorm)
        for a in range(Hp):
            for b in range(max(a, H), Hp):
                gram[l, 0, a, b, j] = zero
                gram[l, 1, a, b, j] = zero

opts = dict(fastmath={"contract"}, cache=True, nogil=True)


@numba.njit(inline="always", **opts)
def _quad4(a00, a01, a02, a03, a11, a12, a13, a22, a23, a33, u0, u1, u2, u3):  # pragma: no cover
    # Σ_{a≤b} g_ab u_a u_b over one block of 4 heads (off-diagonal g doubled)
    t0 = a00 * u0
    t1 = a01 * u0 + a11 * u1
    t2 = a02 * u0 + a12 * u1 + a22 * u2
    t3 = a03 * u0 + a13 * u1 + a23 * u2 + a33 * u3
    return t0 * u0 + t1 * u1 + t2 * u2 + t3 * u3


@numba.njit(**opts)
def _diag_block(x0_0, x0_1, x0_2, x0_3, x1_0, x1_1, x1_2, x1_3,
                g00, g01, g02, g03, g11, g12, g13, g22, g23, g33, q0, q1):  # pragma: no cover
    # two rows' q_j += Σ_{a≤b} g_ab[j] x_a[j] x_b[j] over one block of 4 heads, each g_ab[j] loaded once for
    # both rows (inlined: no call per j)
    for j in range(q0.shape[0]):
        a00 = g00[j]; a01 = g01[j]; a02 = g02[j]; a03 = g03[j]; a11 = g11[j]; a12 = g12[j]; a13 = g13[j]
        a22 = g22[j]; a23 = g23[j]; a33 = g33[j]
        q0[j] += _quad4(a00, a01, a02, a03, a11, a12, a13, a22, a23, a33, x0_0[j], x0_1[j], x0_2[j], x0_3[j])
        q1[j] += _quad4(a00, a01, a02, a03, a11, a12, a13, a22, a23, a33, x1_0[j], x1_1[j], x1_2[j], x1_3[j])



@numba.njit(**opts)
def _pair_block(x0_0, x0_1, x0_2, x0_3, y0_0, y0_1, y0_2, y0_3, x1_0, x1_1, x1_2, x1_3, y1_0, y1_1, y1_2, y1_3,
                c0, c1, c2, c3, q0, q1):  # pragma: no cover
    # two rows' q_j += Σ_b y_b[j] Σ_a g_ab[j] x_a[j] for two blocks of 4 heads; c_a = g[a, block b] ([4, n])
    for j in range(q0.shape[0]):
        c00 = c0[0, j]; c01 = c0[1, j]; c02 = c0[2, j]; c03 = c0[3, j]
        c10 = c1[0, j]; c11 = c1[1, j]; c12 = c1[2, j]; c13 = c1[3, j]
        c20 = c2[0, j]; c21 = c2[1, j]; c22 = c2[2, j]; c23 = c2[3, j]
        c30 = c3[0, j]; c31 = c3[1, j]; c32 = c3[2, j]; c33 = c3[3, j]
        u0 = x0_0[j]; u1 = x0_1[j]; u2 = x0_2[j]; u3 = x0_3[j]
        t0 = c00 * u0 + c10 * u1 + c20 * u2 + c30 * u3
        t1 = c01 * u0 + c11 * u1 + c21 * u2 + c31 * u3
        t2 = c02 * u0 + c12 * u1 + c22 * u2 + c32 * u3
        t3 = c03 * u0 + c13 * u1 + c23 * u2 + c33 * u3
        q0[j] += t0 * y0_0[j] + t1 * y0_1[j] + t2 * y0_2[j] + t3 * y0_3[j]
        u0 = x1_0[j]; u1 = x1_1[j]; u2 = x1_2[j]; u3 = x1_3[j]
        t0 = c00 * u0 + c10 * u1 + c20 * u2 + c30 * u3
        t1 = c01 * u0 + c11 * u1 + c21 * u2 + c31 * u3
        t2 = c02 * u0 + c12 * u1 + c22 * u2 + c32 * u3
        t3 = c03 * u0 + c13 * u1 + c23 * u2 + c33 * u3
        q1[j] += t0 * y1_0[j] + t1 * y1_1[j] + t2 * y1_2[j] + t3 * y1_3[j]


@numba.njit(parallel=True, fastmath={"contract"}, cache=True, nogil=True)
def pair_norms_fused(alpha, gram, gx, fnorm, inv_s, norm_out, layer_out, res_out, ln_out,
                     with_norm, with_layer, with_res, with_ln):  # pragma: no cover - compiled
    # Every α-sized output of the norm family in one pass over α, two rows i, i' per task (each Gram value
    # loaded once for both: the pass is bound by reading G, [Hp, Hp, n] per layer and stage, not by arithmetic),
    # j innermost (α's own layout, vectorised over j). alpha [L, H, n, n]; gram, gx, fnorm, inv_s from
    # span_grams_packed.
    #   norm_out[l, h, i, j] = α^h_ij ‖f^h_j‖                                   (with_norm)
    #   layer_out[l, i, j]   = sqrt(q0), q0 = α_ijᵀ G_j α_ij over the heads (plain Gram)   (with_layer)
    #   res_out[l, i, j]     = the same off the diagonal; at i = j, q0 + the residual's terms  (with_res)
    #   ln_out[l, i, j]      = sqrt(q1) / s_i with the weighted Gram, residual on the diagonal  (with_ln)
    # q = Σ over blocks of 4 heads: a diagonal block adds Σ_{a≤b} g_ab α_a α_b, a pair of blocks A < B adds
    # Σ_b α_b Σ_a g_ab α_a; padding heads (≥ H) read the last head's α against g = 0 and add exact zeros.
    # Per pair (i, j) the operations and their order are those of one row at a time (the same bits); with n
    # odd the last task's second row is the first one again, computed twice and written once.
    L, H, n, _ = alpha.shape
    nb = gram.shape[2] // 4
    groups = (n + 1) // 2
    for task in numba.prange(L * groups):
        l = task // groups
        first = 2 * (task - l * groups)
        i0 = first
        i1 = min(first + 1, n - 1)  # n odd: the last task's second row is its first again
        last = min(first + 2, n)
        if with_norm:
            for i in range(first, last):
                for h in range(H):
                    a = alpha[l, h, i]
                    fn = fnorm[l, h]
                    o = norm_out[l, h, i]
                    for j in range(n):
                        o[j] = a[j] * fn[j]
        qq = np.empty((2, n), dtype=alpha.dtype)
        for s in range(2):
            if (s == 0 and (with_layer or with_res)) or (s == 1 and with_ln):
                _pair_sums_two_rows(alpha[l], i0, i1, gram[l, s], nb, H, qq)
                _write_rows(s, qq, alpha[l], first, last, 0, gx[l, s], inv_s[l],  # an output not asked for
                            layer_out[l if with_layer else 0], res_out[l if with_res else 0],  # is a [1, 1, 1]
                            ln_out[l if with_ln else 0], with_layer, with_res)  # stand-in, never written


@numba.njit(**opts)
def _pair_sums_two_rows(alpha, i0, i1, g, nb, H, qq):  # pragma: no cover - compiled
    # qq[0] (row i0), qq[1] (row i1) = α_ijᵀ G_j α_ij over blocks of 4 heads, j innermost, for one layer and
    # stage (alpha [H, rows, m], g [Hp, Hp, n]): the pair sums of pair_norms_fused and pair_norms_rows
    zero = alpha.dtype.type(0)
    qq[:] = zero
    for A in range(nb):
        a0 = 4 * A
        h0 = min(a0, H - 1)
        h1 = min(a0 + 1, H - 1)
        h2 = min(a0 + 2, H - 1)
        h3 = min(a0 + 3, H - 1)
        x0, x1, x2, x3 = alpha[h0, i0], alpha[h1, i0], alpha[h2, i0], alpha[h3, i0]
        w0, w1, w2, w3 = alpha[h0, i1], alpha[h1, i1], alpha[h2, i1], alpha[h3, i1]
        _diag_block(x0, x1, x2, x3, w0, w1, w2, w3,
                    g[a0, a0], g[a0, a0 + 1], g[a0, a0 + 2], g[a0, a0 + 3], g[a0 + 1, a0 + 1],
                    g[a0 + 1, a0 + 2], g[a0 + 1, a0 + 3], g[a0 + 2, a0 + 2], g[a0 + 2, a0 + 3],
                    g[a0 + 3, a0 + 3], qq[0], qq[1])
        for B in range(A + 1, nb):
            b0 = 4 * B
            k0 = min(b0, H - 1)
            k1 = min(b0 + 1, H - 1)
            k2 = min(b0 + 2, H - 1)
            k3 = min(b0 + 3, H - 1)
            _pair_block(x0, x1, x2, x3, alpha[k0, i0], alpha[k1, i0], alpha[k2, i0],
                        alpha[k3, i0], w0, w1, w2, w3, alpha[k0, i1], alpha[k1, i1],
                        alpha[k2, i1], alpha[k3, i1], g[a0, b0:b0 + 4], g[a0 + 1, b0:b0 + 4],
                        g[a0 + 2, b0:b0 + 4], g[a0 + 3, b0:b0 + 4], qq[0], qq[1])


@numba.njit(**opts)
def _write_rows(s, qq, alpha, first, last, row0, gx, inv_s, layer_out, res_out, ln_out,
                with_layer, with_res):  # pragma: no cover - compiled
    # stage s's outputs of rows first … last − 1 (token row0 + i) from their pair sums qq (_pair_sums_two_rows):
    # s = 0 the plain norms (layer_out, res_out with the residual at the diagonal), s = 1 the normed ones
    # (ln_out, scaled by 1/s_i); alpha [H, rows, m], gx [H + 1, n] and inv_s [n] the stage's and layer's
    zero = alpha.dtype.type(0)
    H, m = alpha.shape[0], qq.shape[1]
    for i in range(first, last):
        q = qq[i - first]
        gi = row0 + i
        qd = q[gi] + gx[H, gi]
        for h in range(H):
            qd += gx[h, gi] * alpha[h, i, gi]
        if s == 0:
            if with_layer:
                o = layer_out[i]
                for j in range(m):
                    o[j] = np.sqrt(max(q[j], zero))
            if with_res:
                o = res_out[i]
                for j in range(m):
                    o[j] = np.sqrt(max(q[j], zero))
                o[gi] = np.sqrt(max(qd, zero))
        else:
            c = inv_s[gi]
            o = ln_out[i]
            for j in range(m):
                o[j] = c * np.sqrt(max(q[j], zero))
            o[gi] = c * np.sqrt(max(qd, zero))


@numba.njit(parallel=True, fastmath={"contract"}, cache=True, nogil=True)
def pair_norms_rows(alpha, row0, gram, gx, inv_s, mean_out, layer_out, res_out, ln_out,
                    with_mean, with_layer, with_res, with_ln):  # pragma: no cover - compiled
    # pair_norms_fused's α-sized outputs for one block of receiving rows of one layer (a long input's layer,
    # α streamed in row blocks: :mod:`normviz.methods.long_layer`), over the first m contributing tokens only.
    #   alpha [H, r, m]         rows row0 … row0 + r − 1 of α, keys 0 … m − 1 (m ≥ row0 + r: the diagonal
    #                           inside; a causal block's later keys are exact zeros and are left out)
    #   gram [2, Hp, Hp, n], gx [2, H + 1, n], inv_s [n]   the layer's, from span_grams_packed
    #   mean_out, layer_out, res_out, ln_out [r, ≥ m]       rows of the outputs; columns ≥ m are not written
    #   mean_out[i, j] = (α⁰_ij + α¹_ij + … + α^{H−1}_ij) / H, added in that order (long_layer.head_mean's bits)
    # Per pair (i, j) the operations and their order are pair_norms_fused's (the same _diag_block/_pair_block
    # calls, j innermost): the same bits. The norm key (α^h_ij ‖f^h_j‖) is one product: taken in torch.
    H, r, m = alpha.shape
    nb = gram.shape[1] // 4
    groups = (r + 1) // 2
    hh = alpha.dtype.type(H)
    for task in numba.prange(groups):
        first = 2 * task
        i0 = first
        i1 = min(first + 1, r - 1)  # r odd: the last task's second row is its first again
        last = min(first + 2, r)
        if with_mean:
            for i in range(first, last):
                o = mean_out[i]
                a = alpha[0, i]
                for j in range(m):
                    o[j] = a[j]
                for h in range(1, H):
                    a = alpha[h, i]
                    for j in range(m):
                        o[j] += a[j]
                for j in range(m):
                    o[j] = o[j] / hh
        qq = np.empty((2, m), dtype=alpha.dtype)
        for s in range(2):
            if (s == 0 and (with_layer or with_res)) or (s == 1 and with_ln):
                _pair_sums_two_rows(alpha, i0, i1, gram[s], nb, H, qq)
                _write_rows(s, qq, alpha, first, last, row0, gx[s], inv_s, layer_out, res_out, ln_out,
                            with_layer, with_res)
