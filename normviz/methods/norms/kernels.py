"""Compiled CPU kernels (numba) for the two memory-bound steps of the norm maps. numpy in, numpy out.

* ``span_grams_packed``: per-token Gram matrices of the span vectors [f^1_j … f^H_j, x_j], plain and weighted by
  γ² (centred first for LayerNorm), read straight from f's [H, n, d] layout (no [n, H+1, d] copy) and written
  in the layout the pair kernel reads, with ‖f^h_j‖ and 1/s_j of the norm's real input.
* ``pair_norms_fused``: ‖α^h_ij f^h_j‖ and sqrt(c_ijᵀ G_j c_ij) (· 1/s_i for the normed stage) for all four keys
  in one pass over α (j innermost, α's own [H, n, n] layout), the residual on the diagonal included.

torch versions of the same formulas (:mod:`.runs`, :mod:`.pair_norms`) run on GPU/mps, or wherever numba is
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
    from . import compiled

    return {
        "span_grams_packed": compiled.span_grams_packed,
        "pair_norms_fused": compiled.pair_norms_fused,
        "pair_norms_rows": compiled.pair_norms_rows,
    }  # one layer's row blocks (normviz.methods.long_layer)


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
        warnings.warn(
            f"normviz: compiled kernels unavailable ({exc}); using the torch versions.", RuntimeWarning, stacklevel=3
        )
        return False


def warm(dtypes=(np.float32, np.float64)) -> bool:
    """Compile every kernel for ``dtypes`` (or load them from numba's on-disk cache), on tiny inputs.

    ``scripts/setup.sh`` runs this once (scripts/compile_kernels.py), so that later processes load the same cached
    machine code instead of compiling it on first use (seconds), and agree bit for bit."""
    for dt in dtypes:
        out = np.empty((1, 2, 2), dt)
        # the family's own path (runs.kernel_run): H = 1 head padded to 4, n = 2, d = 4
        gram, gx = np.empty((1, 2, 4, 4, 2), dt), np.empty((1, 2, 2, 2), dt)
        fnorm, inv_s = np.empty((1, 1, 2), dt), np.empty((1, 2), dt)
        if not run(
            "span_grams_packed",
            np.zeros((1, 1, 2, 4), dt),
            np.zeros((1, 2, 4), dt),
            np.zeros((1, 2, 4), dt),
            np.ones((1, 4), dt),
            True,
            1e-5,
            gram,
            gx,
            fnorm,
            inv_s,
        ):
            return False
        if not run(
            "pair_norms_fused",
            np.zeros((1, 1, 2, 2), dt),
            gram,
            gx,
            fnorm,
            inv_s,
            np.empty((1, 1, 2, 2), dt),
            out,
            np.empty_like(out),
            np.empty_like(out),
            True,
            True,
            True,
            True,
        ):
            return False
        if not run(
            "pair_norms_rows",
            np.zeros((1, 2, 2), dt),
            0,
            gram[0],
            gx[0],
            inv_s[0],
            out[0],
            np.empty_like(out[0]),
            np.empty_like(out[0]),
            np.empty_like(out[0]),
            True,
            True,
            True,
            True,
        ):
            return False
    return True


def c_contiguous_out(target: np.ndarray) -> np.ndarray:
    """``target`` itself when a kernel can write it directly, else a contiguous stand-in to copy back."""
    return target if target.flags.c_contiguous and target.flags.writeable else np.empty(target.shape, target.dtype)
