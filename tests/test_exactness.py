"""Every stage's token parts plus its bias term rebuild the model's own vector (float64, ≤1e-6 relative)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz.analysis import analyze_encoded
from normviz.decompose import LayerDecomposition
from normviz.record import record
from normviz.tokens import pad_batch

from .tiny import ARCHS, encoded, tiny_model
from .vectors import independent_head_vectors, model_vectors

TOL = 1e-6


def close(parts_sum: torch.Tensor, target: torch.Tensor, tol: float = TOL):
    scale = target.abs().max().item()
    err = (parts_sum - target).abs().max().item()
    assert err <= tol * scale, f"max error {err:.3e} > {tol} × {scale:.3e}"


def contexts(lm, enc):
    ids, mask = pad_batch([enc])
    recs = record(lm, ids, mask)[0]
    return [LayerDecomposition(r, lm.layer_params(i), lm.spec.placement, chunk_bytes=4096) for i, r in enumerate(recs)]


@pytest.fixture(scope="module", params=ARCHS)
def setup(request):
    lm = tiny_model(request.param)
    enc = encoded(n=11)
    return lm, enc, contexts(lm, enc), model_vectors(lm, enc.ids)


def all_rows(ctx, fn):
    """Concatenate chunked per-pair vectors over every row chunk (the test uses tiny chunks)."""
    parts, biases = [], []
    for rows in ctx.row_chunks():
        p, b = fn(rows)
        parts.append(p)
        biases.append(b)
    return torch.cat(parts), torch.cat(biases)


def test_chunks_are_small(setup):
    lm, enc, ctxs, mv = setup
    assert len(list(ctxs[0].row_chunks())) > 1  # the chunked path is exercised


def test_attention_output_and_residual(setup):
    lm, enc, ctxs, mv = setup
    for ctx, v in zip(ctxs, mv):
        u, b = all_rows(ctx, ctx.attn_res_vectors)
        close(u.sum(1) + b, v["z"])  # Σ_j u_ij + b^O = x_i + Attn_i
        close(u.sum(1) - ctx.rec.x + b, v["attn_out"])


def test_attn_res_ln_stage(setup):
    lm, enc, ctxs, mv = setup
    for ctx, v in zip(ctxs, mv):
        parts, bias = all_rows(ctx, ctx.attn_res_ln_vectors)
        close(parts.sum(1) + bias, v["ln_out"])


def test_ff_stages(setup):
    lm, enc, ctxs, mv = setup
    for ctx, v in zip(ctxs, mv):
        stages = {k: all_rows(ctx, lambda r, k=k: ctx.ff_vectors(r)[k])
                  for k in (["ff", "ff_res"] + (["ff_res_ln"] if lm.spec.placement == "post" else []))}
        parts, bias = stages["ff"]
        close(parts.sum(1) + bias, v["ff_out"])
        parts, bias = stages["ff_res"]
        close(parts.sum(1) + bias, v["z_ff"] if lm.spec.placement == "post" else v["layer_out"])
        if lm.spec.placement == "post":
            parts, bias = stages["ff_res_ln"]
            close(parts.sum(1) + bias, v["layer_out"])


def test_maps_equal_norms_of_vectors(setup):
    """The Gram route gives the norms of the explicit per-pair vectors, and the FF maps their norms."""
    lm, enc, ctxs, mv = setup
    a = analyze_encoded(lm, [enc], chunk_bytes=4096)[0]
    for layer, (ctx, v) in enumerate(zip(ctxs, mv)):
        u, _ = all_rows(ctx, ctx.attn_res_vectors)
        np.testing.assert_allclose(a["attn_res"][layer], u.norm(dim=-1).numpy(), rtol=1e-9, atol=1e-12)
        no_res = u - torch.diag_embed(torch.ones(u.shape[0], dtype=u.dtype)).unsqueeze(-1) * ctx.rec.x[None]
        np.testing.assert_allclose(a["norm_layer"][layer], no_res.norm(dim=-1).numpy(), rtol=1e-9, atol=1e-12)
        ln, _ = all_rows(ctx, ctx.attn_res_ln_vectors)
        np.testing.assert_allclose(a["attn_res_ln"][layer], ln.norm(dim=-1).numpy(), rtol=1e-9, atol=1e-12)
        for key in ("ff", "ff_res", "ff_res_ln"):
            if key in a:
                vec, _ = all_rows(ctx, lambda r, k=key: ctx.ff_vectors(r)[k])
                np.testing.assert_allclose(a[key][layer], vec.norm(dim=-1).numpy(), rtol=1e-9, atol=1e-12)


def test_attention_and_norm_against_model(setup):
    """attention = the model's output attentions; norm = α·‖f(x)‖ with f from the model's own value output."""
    lm, enc, ctxs, mv = setup
    a = analyze_encoded(lm, [enc])[0]
    for layer, v in enumerate(mv):
        np.testing.assert_allclose(a["attention"][layer], v["attn"].numpy(), rtol=1e-12, atol=1e-14)
        f = independent_head_vectors(lm, layer, v["value"])
        expected = v["attn"] * f.norm(dim=-1)[:, None, :]
        np.testing.assert_allclose(a["norm"][layer], expected.numpy(), rtol=1e-9, atol=1e-12)


def test_causal_models_have_no_future_contributions(setup):
    lm, enc, ctxs, mv = setup
    if lm.spec.placement == "post":
        pytest.skip("encoder")
    a = analyze_encoded(lm, [enc])[0]
    iu = np.triu_indices(enc and len(enc.ids), 1)
    for key in a.keys():
        arr = a[key]
        assert np.all(arr[..., iu[0], iu[1]] == 0), key


def test_batch_equals_single():
    lm = tiny_model("gpt2")
    encs = [encoded(n=5, seed=3), encoded(n=12, seed=4)]
    batch = analyze_encoded(lm, encs)
    for enc, got in zip(encs, batch):
        single = analyze_encoded(lm, [enc])[0]
        for key in single.keys():
            np.testing.assert_allclose(got[key], single[key], rtol=1e-9, atol=1e-12)


def test_concurrent_recording_is_isolated():
    """Hooks live on the shared model; concurrent analyses must not read each other's activations."""
    from concurrent.futures import ThreadPoolExecutor

    lm = tiny_model("bert")
    encs = [encoded(n=6 + k, seed=10 + k) for k in range(4)]
    alone = [analyze_encoded(lm, [e], methods=["attn_res"])[0]["attn_res"] for e in encs]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda e: analyze_encoded(lm, [e], methods=["attn_res"])[0]["attn_res"], encs * 3))
    for k, got in enumerate(together):
        np.testing.assert_allclose(got, alone[k % 4], rtol=1e-12, atol=1e-14)
