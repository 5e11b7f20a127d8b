"""Shared helpers of the model tests: per-layer views of a tiny model's records, analyses through the public
Session entry points, exactness comparisons and a forward-pass counter."""

from __future__ import annotations

import contextlib

import numpy as np
import torch

import normviz
from normviz.methods.feedforward import ff_vectors
from normviz.record.decompose import LayerDecomposition

TOL = 1e-6


def close(parts_sum: torch.Tensor, target: torch.Tensor, tol: float = TOL):
    scale = target.abs().max().item()
    err = (parts_sum - target).abs().max().item()
    assert err <= tol * scale, f"max error {err:.3e} > {tol} × {scale:.3e}"


# Two forward passes of one model on the same input, or the same arrays from two processes, agree up to GEMM
# rounding only, not bit for bit: MKL's (and oneDNN's) GEMM is not reproducible across calls without its CNR mode
# (MKL_DYNAMIC picks the thread count per call, the split of a reduction follows the threads, and the kernel
# path follows the buffers' alignment). Under load two passes once differed in the last bit (issue 22 item 7).
# So such comparisons use a tolerance scaled to the largest |value|: 1e-12 in float64, 1e-5 in float32, many
# orders of magnitude below what a wrong layer, position, text or an overwritten array would give.
PASS_TOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}


def same_up_to_rounding(got, want, tol: float | None = None, what: str = "") -> None:
    """``got`` equals ``want`` (two passes' arrays, numpy or torch) within ``tol`` × max |want| (see PASS_TOL)."""
    got = got.detach().cpu().numpy() if isinstance(got, torch.Tensor) else np.asarray(got)
    want = want.detach().cpu().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if tol is None:
        tol = max(PASS_TOL.get(got.dtype, 0.0), PASS_TOL.get(want.dtype, 0.0))
    scale = float(np.abs(want).max()) if want.size else 0.0
    err = float(np.abs(got.astype(np.float64) - want.astype(np.float64)).max()) if want.size else 0.0
    assert err <= tol * scale, f"{what}: max error {err:.3e} > {tol} × {scale:.3e}"


def decompositions(lm, recs, chunk_bytes: int = 4096, use_kernel=None) -> list[LayerDecomposition]:
    """One LayerDecomposition per layer of one sequence's records (small row chunks by default)."""
    return [
        LayerDecomposition(r, lm.layer_params(i), index=i, chunk_bytes=chunk_bytes, use_kernel=use_kernel)
        for i, r in enumerate(recs)
    ]


def all_rows(ctx, fn):
    """Concatenate chunked per-pair vectors over every row chunk (the tests use tiny chunks)."""
    parts, biases = [], []
    for rows in ctx.row_chunks():
        p, b = fn(rows)
        parts.append(p)
        biases.append(b)
    return torch.cat(parts), torch.cat(biases)


def ff_stage(ctx, key: str):
    """(parts [n, n, d], bias [n, d]) of one FF stage over all row chunks."""
    return all_rows(ctx, lambda rows: ff_vectors(ctx, rows)[key])


def analyses(lm, encs, keys=None, options=None) -> list:
    """The maps ``keys`` of already tokenised sequences, recorded in one right-padded pass."""
    return [s.get(keys) for s in normviz.Session.from_encoded(lm, list(encs), options=options)]


def analysis(lm, enc, keys=None, options=None):
    return analyses(lm, [enc], keys, options)[0]


@contextlib.contextmanager
def count_forward(module: torch.nn.Module):
    """Counts calls of ``module`` (a pre-hook): ``with count_forward(lm.model) as calls: …; calls[0]``."""
    calls = [0]

    def hook(mod, args, kwargs):
        calls[0] += 1

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield calls
    finally:
        handle.remove()


def in_threads(fn, n: int, barrier: bool = False) -> None:
    """Run fn(i) for i < n in n threads at once (all released together with ``barrier``) and wait for them."""
    import threading

    gate = threading.Barrier(n) if barrier else None

    def go(i):
        if gate is not None:
            gate.wait()
        fn(i)

    threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
