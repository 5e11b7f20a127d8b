"""Compiled CPU kernels (numba) for the two memory-bound steps of the norm maps. numpy in, numpy out.

* ``span_grams``: per-token Gram matrices of the span vectors [f^1_j … f^H_j, x_j], plain and weighted by γ²
  (centred first for LayerNorm), read straight from f's [H, n, d] layout: no [n, H+1, d] copy.
* ``pair_norms``: scale_i · sqrt(α_ijᵀ G_j α_ij) for one or two Grams, in one pass over α (j innermost, α's
  own [H, n, n] layout), optionally writing ‖α^h_ij f^h_j‖ = α^h_ij ‖f^h_j‖ in the same pass.

torch versions of the same formulas (:mod:`.runs`, :mod:`.pair_norms`) and run on GPU/mps, or wherever numba is
missing or fails; tests check that both agree. numba is imported and the kernels compiled (or loaded from
numba's on-disk cache) on first use only.
"""
from __future__ import annotations

import importlib.util
import threading
import warnings

import numpy as np

_LOCK = threading.Lock()  # numba's thread pool must not be entered from two threads at once
_KERNELS: dict[str, object] = {}
_FAILED = False


def available() -> bool:
    return not _FAILED and importlib.util.find_spec("numba") is not None


def _build() -> dict[str, object]:
    import numba

    @numba.njit(parallel=True, fastmath=True, cache=True, nogil=True)
    def span_grams(f, x, gamma2, centre, plain, weighted):  # pragma: no cover - compiled
        # Layers l, tokens j: f [L, H, n, d], x [L, n, d], gamma2 [L, d]; vector a of (l, j) is f[l, a, j]
        # (a < H) or x[l, j] (a = H). plain[l, j, a, b] = Σ_k e_a e_b; weighted[l, j, a, b] = Σ_k γ_k² e_a e_b,
        # or with centre (LayerNorm) Σ_k γ_k² (e_a − ē_a)(e_b − ē_b) = Σγ²e_a e_b − ē_a Σγ²e_b − ē_b Σγ²e_a + ē_a ē_b Σγ².
        L, H, n, d = f.shape
        K = H + 1
        zero = gamma2.dtype.type(0)  # accumulate in the working dtype (float32 stays float32, as in BLAS)
        # fast-math lets the sums over k vectorise; the price: numba's freshly compiled and cached versions may
        # differ in the last bit (pair_norms, elementwise over j, needs only contraction and has no such spread)
        for lj in numba.prange(L * n):
            l = lj // n
            j = lj - l * n
            g2 = gamma2[l]
            gsum = zero
            for k in range(d):
                gsum += g2[k]
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
                    plain[l, j, a, b] = acc
                    plain[l, j, b, a] = acc
                    weighted[l, j, a, b] = accw
                    weighted[l, j, b, a] = accw

    @numba.njit(parallel=True, fastmath={"contract"}, cache=True, nogil=True)
    def pair_norms(alpha, gram2, scale, out0, out1, fnorm, norm_out, with_norm):  # pragma: no cover - compiled
        # Layers l, rows i: alpha [L, H, n, n]; gram2 [L, S, H, H, n] (j last) with off-diagonal entries doubled
        # (h' > h used only); scale [L, S, n]; S ≤ 2 stages written to out0, out1 [L, n, n]:
        # out_s[l, i, j] = scale[l, s, i] · sqrt(q), q = Σ_h α_h Σ_{h' ≥ h} gram2[h, h'] α_h' = α_ijᵀ G_j α_ij;
        # with_norm: norm_out[l, h, i, j] = α^h_ij · fnorm[l, h, j] as well (same pass over α).
        # Rows go four at a time so that each load of gram2 serves four rows.
        L, S, H, _, n = gram2.shape
        R = 4
        blocks = (n + R - 1) // R
        for lb in numba.prange(L * blocks):
            l = lb // blocks
            i0 = (lb - l * blocks) * R
            m = min(R, n - i0)
            t = np.empty((R, n), dtype=alpha.dtype)
            q = np.empty((R, n), dtype=alpha.dtype)
            if with_norm:
                for h in range(H):
                    fn = fnorm[l, h]
                    for r in range(m):
                        a = alpha[l, h, i0 + r]
                        o = norm_out[l, h, i0 + r]
                        for j in range(n):
                            o[j] = a[j] * fn[j]
            for s in range(S):
                q[:] = 0
                for h in range(H):
                    g = gram2[l, s, h, h]
                    for r in range(m):
                        a = alpha[l, h, i0 + r]
                        tr = t[r]
                        for j in range(n):
                            tr[j] = g[j] * a[j]
                    for h2 in range(h + 1, H):
                        g2 = gram2[l, s, h, h2]
                        if m == R:
                            a0 = alpha[l, h2, i0]
                            a1 = alpha[l, h2, i0 + 1]
                            a2 = alpha[l, h2, i0 + 2]
                            a3 = alpha[l, h2, i0 + 3]
                            t0 = t[0]
                            t1 = t[1]
                            t2 = t[2]
                            t3 = t[3]
                            for j in range(n):
                                gj = g2[j]
                                t0[j] += gj * a0[j]
                                t1[j] += gj * a1[j]
                                t2[j] += gj * a2[j]
                                t3[j] += gj * a3[j]
                        else:
                            for r in range(m):
                                ar = alpha[l, h2, i0 + r]
                                tr = t[r]
                                for j in range(n):
                                    tr[j] += g2[j] * ar[j]
                    for r in range(m):
                        a = alpha[l, h, i0 + r]
                        tr = t[r]
                        qr = q[r]
                        for j in range(n):
                            qr[j] += a[j] * tr[j]
                for r in range(m):
                    o = out0[l, i0 + r] if s == 0 else out1[l, i0 + r]
                    c = scale[l, s, i0 + r]
                    qr = q[r]
                    for j in range(n):
                        o[j] = c * np.sqrt(max(qr[j], 0))

    return {"span_grams": span_grams, "pair_norms": pair_norms}


def run(name: str, *args) -> bool:
    """Run kernel ``name`` on numpy arrays; False (and a one-time warning) if numba can't be used here."""
    global _FAILED
    if not available():
        return False
    try:
        with _LOCK:
            if not _KERNELS:
                _KERNELS.update(_build())
            _KERNELS[name](*args)
        return True
    except Exception as exc:  # pragma: no cover - e.g. a numba cache directory that can't be read or written
        _FAILED = True
        warnings.warn(f"normviz: compiled kernels unavailable ({exc}); using the torch versions.",
                      RuntimeWarning, stacklevel=3)
        return False


def warm() -> bool:
    """Compile both kernels for float32 and float64 (or load them from numba's on-disk cache), on tiny inputs.

    ``scripts/setup.sh`` runs this once, so that later processes load the same cached machine code instead of
    compiling it on first use (seconds), and agree bit for bit."""
    for dt in (np.float32, np.float64):
        plain = np.empty((1, 2, 2, 2), dt)
        if not run("span_grams", np.zeros((1, 1, 2, 4), dt), np.zeros((1, 2, 4), dt), np.ones((1, 4), dt), True,
                   plain, np.empty_like(plain)):
            return False
        out = np.empty((1, 2, 2), dt)
        if not run("pair_norms", np.zeros((1, 1, 2, 2), dt), np.zeros((1, 1, 1, 1, 2), dt), np.ones((1, 1, 2), dt),
                   out, out, np.zeros((1, 1, 2), dt), np.empty((1, 1, 2, 2), dt), True):
            return False
    return True


def c_contiguous_out(target: np.ndarray) -> np.ndarray:
    """``target`` itself when a kernel can write it directly, else a contiguous stand-in to copy back."""
    return target if target.flags.c_contiguous and target.flags.writeable else np.empty(target.shape, target.dtype)
