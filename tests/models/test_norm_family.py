"""The norm family on tiny models: the compiled-kernel and torch backends agree, a run of layers gives what
single layers give (and fills the targets it is given), and the analysis is the same on either path."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz.methods.norms import kernels
from normviz.methods.norms.runs import KEYS, backend, norm_family_run, runs
from normviz.record.decompose import CHUNK_BYTES

from ..helpers.maps import analysis, decompositions, same_up_to_rounding
from ..helpers.tiny import encoded

needs_kernel = pytest.mark.skipif(not kernels.available(), reason="numba is not installed")


def _views(records, arch, n=8, use_kernel=None):
    lm, enc, recs = records(arch, n=n)
    return lm, decompositions(lm, recs, chunk_bytes=CHUNK_BYTES, use_kernel=use_kernel)


def _single(ctx, keys, use):
    """One layer's maps through a run of one layer: {key: [...]} without the layer axis."""
    return {k: v[0] for k, v in norm_family_run([ctx], keys, use).items()}


@needs_kernel
@pytest.mark.parametrize("arch", ["bert", "gpt2", "llama"])
def test_kernel_and_torch_paths_agree(records, arch):
    keys = list(KEYS)
    _, kernel_ctxs = _views(records, arch, use_kernel=None)
    _, torch_ctxs = _views(records, arch, use_kernel=False)
    assert backend(kernel_ctxs) == "kernels" and backend(torch_ctxs) == "torch"
    for a, b in zip(kernel_ctxs, torch_ctxs):
        got, ref = _single(a, keys, "kernels"), _single(b, keys, "torch")
        for k in keys:
            torch.testing.assert_close(got[k], ref[k], rtol=1e-12, atol=1e-14)


@needs_kernel
@pytest.mark.parametrize("use", ["kernels", "torch"])
def test_run_of_layers_equals_single_layers_and_fills_targets(records, use):
    keys = list(KEYS)
    _, ctxs = _views(records, "bert")
    single = [_single(c, keys, use) for c in _views(records, "bert")[1]]
    L, n, H = len(ctxs), ctxs[0].n, ctxs[0].alpha.shape[0]
    buf = torch.full((n, n, L), -1.0, dtype=torch.float64)
    targets = {"attn_res_ln": buf.permute(2, 0, 1)}  # a strided destination: written through a stand-in
    run = norm_family_run(ctxs, keys, use, targets=targets)
    for layer in range(L):
        for k in keys:
            torch.testing.assert_close(run[k][layer], single[layer][k], rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(targets["attn_res_ln"], torch.stack([s["attn_res_ln"] for s in single]))
    assert run["norm"].shape == (L, H, n, n)


@needs_kernel
def test_runs_split_by_memory(records):
    _, ctxs = _views(records, "bert")
    per_layer = ctxs[0].alpha.shape[0] * ctxs[0].n * ctxs[0].rec.x.shape[-1] * 8
    assert [s.stop - s.start for s in runs(ctxs, run_bytes=per_layer)] == [1] * len(ctxs)
    assert list(runs(ctxs, run_bytes=1 << 30)) == [slice(0, len(ctxs))]


def test_analysis_without_kernels_is_the_same(tiny_model, records, monkeypatch):
    lm = tiny_model("llama")
    enc = encoded(7)
    with_kernels = analysis(lm, enc, list(KEYS) + ["attention"])
    monkeypatch.setattr(kernels, "available", lambda: False)
    assert backend(_views(records, "llama", n=7)[1]) == "torch"
    without = analysis(lm, enc, list(KEYS) + ["attention"])
    for k in with_kernels.keys():
        np.testing.assert_allclose(with_kernels[k], without[k], rtol=1e-12, atol=1e-14)


def test_kernel_failure_falls_back_to_torch_with_a_warning(tiny_model, monkeypatch):
    """A kernel that can't be built (e.g. an unwritable numba cache) gives a warning and the torch results."""
    lm = tiny_model("bert")
    enc = encoded(6)
    keys = list(KEYS)
    reference = analysis(lm, enc, keys)

    def broken():
        raise RuntimeError("cannot cache function")

    monkeypatch.setattr(kernels, "_KERNELS", {})
    monkeypatch.setattr(kernels, "_FAILED", False)
    monkeypatch.setattr(kernels, "_build", broken)
    with pytest.warns(RuntimeWarning, match="compiled kernels unavailable"):
        got = analysis(lm, enc, keys)
    assert not kernels.available()
    for k in keys:
        np.testing.assert_allclose(got[k], reference[k], rtol=1e-12, atol=1e-14)


def test_pooled_results_are_reused_only_after_they_are_dropped(tiny_model, monkeypatch):
    """The result arrays and the run's scratch come from normviz.core.pool: a kept analysis is never overwritten by
    the next one, and once it is dropped the next analysis of that size takes its blocks (no fresh memory)."""
    from normviz.core import pool

    monkeypatch.setattr(pool, "POOL", pool.ArrayPool(max_idle_bytes=64 * 2**20, max_idle_takes=64, min_bytes=0))
    lm, enc, keys = tiny_model("bert"), encoded(9), ["attention"] + list(KEYS)
    analysis(lm, enc, keys)  # a model's first forward pass may round differently (torch's first-call paths)
    first = analysis(lm, enc, keys)
    kept = {k: first[k].copy() for k in keys}
    second = analysis(lm, enc, keys)  # the first is still alive: fresh blocks
    for k in keys:
        assert np.array_equal(first[k], kept[k])  # not overwritten: bit for bit, the same array
        same_up_to_rounding(second[k], kept[k], what=k)  # another pass (helpers.maps.PASS_TOL)
        assert not np.shares_memory(first[k], second[k])
    addresses = {first[k].__array_interface__["data"][0] for k in keys}
    del first
    misses = pool.POOL.misses
    third = analysis(lm, enc, keys)
    assert pool.POOL.misses == misses  # every block of the third analysis was a free one
    assert addresses <= {third[k].__array_interface__["data"][0] for k in keys}
    for k in keys:
        same_up_to_rounding(third[k], kept[k], what=k)
