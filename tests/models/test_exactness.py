"""Every stage's token parts plus its bias term rebuild the model's own vector (float64, ≤1e-6 relative)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz

from ..helpers.maps import all_rows, analyses, analysis, close, decompositions, ff_stage, same_up_to_rounding
from ..helpers.tiny import ARCHS, encoded
from ..helpers.vectors import independent_head_vectors, model_vectors


@pytest.fixture(scope="module", params=ARCHS)
def setup(request, records):
    lm, enc, recs = records(request.param, n=11)
    return lm, enc, decompositions(lm, recs, chunk_bytes=4096), model_vectors(lm, enc.ids)


def test_chunks_are_small(setup):
    lm, enc, ctxs, mv = setup
    assert len(list(ctxs[0].row_chunks())) > 1  # the chunked path is exercised


def test_session_views_are_the_recorded_layers(setup):
    """Session.layers() gives the same records as recording directly, with the chunk size of its options."""
    lm, enc, ctxs, mv = setup
    views = normviz.Session.from_encoded(lm, [enc], options={"chunk_bytes": 4096})[0].layers()
    assert [v.index for v in views] == list(range(lm.n_layers))
    for v, c in zip(views, ctxs):
        assert v.chunk_bytes == 4096
        # two recording passes: equal up to GEMM rounding (helpers.maps.PASS_TOL says why not bit for bit)
        same_up_to_rounding(v.rec.x, c.rec.x, what=f"layer {v.index} x")
        same_up_to_rounding(v.rec.out, c.rec.out, what=f"layer {v.index} out")


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
        stages = {
            k: ff_stage(ctx, k) for k in (["ff", "ff_res"] + (["ff_res_ln"] if lm.spec.placement == "post" else []))
        }
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
    a = analysis(lm, enc, options={"chunk_bytes": 4096})
    for layer, (ctx, v) in enumerate(zip(ctxs, mv)):
        u, _ = all_rows(ctx, ctx.attn_res_vectors)
        np.testing.assert_allclose(a["attn_res"][layer], u.norm(dim=-1).numpy(), rtol=1e-9, atol=1e-12)
        no_res = u - torch.diag_embed(torch.ones(u.shape[0], dtype=u.dtype)).unsqueeze(-1) * ctx.rec.x[None]
        np.testing.assert_allclose(a["norm_layer"][layer], no_res.norm(dim=-1).numpy(), rtol=1e-9, atol=1e-12)
        ln, _ = all_rows(ctx, ctx.attn_res_ln_vectors)
        np.testing.assert_allclose(a["attn_res_ln"][layer], ln.norm(dim=-1).numpy(), rtol=1e-9, atol=1e-12)
        for key in ("ff", "ff_res", "ff_res_ln"):
            if key in a:
                vec, _ = ff_stage(ctx, key)
                np.testing.assert_allclose(a[key][layer], vec.norm(dim=-1).numpy(), rtol=1e-9, atol=1e-12)
    assert ("ff_res_ln" in a) == (lm.spec.placement == "post")


def test_attention_and_norm_against_model(setup):
    """attention = the model's output attentions; norm = α·‖f(x)‖ with f from the model's own value output."""
    lm, enc, ctxs, mv = setup
    a = analysis(lm, enc)
    for layer, v in enumerate(mv):
        np.testing.assert_allclose(a["attention"][layer], v["attn"].numpy(), rtol=1e-12, atol=1e-14)
        f = independent_head_vectors(lm, layer, v["value"])
        expected = v["attn"] * f.norm(dim=-1)[:, None, :]
        np.testing.assert_allclose(a["norm"][layer], expected.numpy(), rtol=1e-9, atol=1e-12)


def test_causal_models_have_no_future_contributions(setup):
    lm, enc, ctxs, mv = setup
    if lm.spec.placement == "post":
        pytest.skip("encoder")
    a = analysis(lm, enc)
    iu = np.triu_indices(len(enc.ids), 1)
    assert a.keys()
    for key in a.keys():
        arr = a[key]
        assert np.all(arr[..., iu[0], iu[1]] == 0), key


def test_batch_equals_single(tiny_model):
    lm = tiny_model("gpt2")
    encs = [encoded(n=5, seed=3), encoded(n=12, seed=4)]
    batch = analyses(lm, encs)
    for enc, got in zip(encs, batch):
        single = analysis(lm, enc)
        assert got.keys() == single.keys()
        for key in single.keys():
            np.testing.assert_allclose(got[key], single[key], rtol=1e-9, atol=1e-12)


def test_concurrent_recording_is_isolated(tiny_model):
    """Hooks live on the shared model; concurrent analyses must not read each other's activations."""
    from concurrent.futures import ThreadPoolExecutor

    lm = tiny_model("bert")
    encs = [encoded(n=6 + k, seed=10 + k) for k in range(4)]
    alone = [analysis(lm, e, ["attn_res"])["attn_res"] for e in encs]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(lambda e: analysis(lm, e, ["attn_res"])["attn_res"], encs * 3))
    for k, got in enumerate(together):
        np.testing.assert_allclose(got, alone[k % 4], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("arch", ["llama", "qwen3"])
def test_ff_parts_end_where_their_own_formula_does(records, arch):
    """Llama-family float64: the FF parts sum to FF(h) at h = ctx.ln_attn_out, the norm's output by the float64
    formula the attention parts use, to 1e-12: the integration's end point is that h. The model's own RMSNorm
    rounds through float32 even in a float64 model; the FF of its output is ~1e-7 (relative) away."""
    lm, enc, recs = records(arch, n=11)
    gaps = []
    for ctx in decompositions(lm, recs, chunk_bytes=4096):
        parts, bias = ff_stage(ctx, "ff")
        mlp = lm.layers[ctx.index].mlp
        own_end = mlp(ctx.ln_attn_out)
        close(parts.sum(1) + bias, own_end, tol=1e-12)
        module_end = mlp(ctx.ln_attn.module(ctx.rec.z_attn))
        gaps.append(float((module_end - own_end).abs().max() / own_end.abs().max()))
    assert 1e-10 < max(gaps) < 1e-5
