"""The exactness checks on the two embedded models, in float32, on a short sentence."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import normviz
from normviz.core.tokens import encode, pad_batch
from normviz.methods.feedforward import ff_vectors
from normviz.methods.norms.runs import KEYS, backend, norm_family_run
from normviz.record.decompose import LayerDecomposition
from normviz.record.recorder import record

from ..helpers.maps import all_rows, analysis, close, decompositions
from ..helpers.vectors import independent_head_vectors, model_vectors

F32_TOL = 2e-5
SENTENCE = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module", params=["minilm", "smollm2"])
def embedded(request):
    lm = request.getfixturevalue(request.param)
    enc = encode(lm.tokenizer, SENTENCE)
    ids, mask = pad_batch([enc])
    return lm, enc, decompositions(lm, record(lm, ids, mask)[0]), model_vectors(lm, enc.ids)


def test_embedded_shapes_and_tokens(embedded):
    lm, enc, ctxs, mv = embedded
    a = normviz.analyze(lm, SENTENCE)
    n = len(enc.ids)
    L, H = lm.n_layers, lm.n_heads
    assert a.tokens == enc.tokens and a.n_tokens == n
    assert a["attention"].shape == (L, H, n, n) and a["norm"].shape == (L, H, n, n)
    for key in ("norm_layer", "attn_res", "attn_res_ln", "ff", "ff_res"):
        assert a[key].shape == (L, n, n)
    assert ("ff_res_ln" in a) == (lm.spec.placement == "post")
    assert a["attention"].dtype == np.float32
    if lm.name == "minilm":
        assert a.tokens[0] == "[CLS]" and a.tokens[-1] == "[SEP]"
        assert a.special[0] and a.special[-1] and not a.special[1:-1].any()


def test_embedded_completeness(embedded):
    lm, enc, ctxs, mv = embedded
    for ctx, v in zip(ctxs, mv):
        u, b = all_rows(ctx, ctx.attn_res_vectors)
        close(u.sum(1) + b, v["z"], F32_TOL)
        ln, lb = all_rows(ctx, ctx.attn_res_ln_vectors)
        close(ln.sum(1) + lb, v["ln_out"], F32_TOL)
        stages = {}
        for rows in ctx.row_chunks():
            for k, (p, bias) in ff_vectors(ctx, rows).items():
                stages.setdefault(k, []).append(p.sum(1) + bias)
        close(torch.cat(stages["ff"]), v["ff_out"], F32_TOL)
        final = "ff_res_ln" if lm.spec.placement == "post" else "ff_res"
        close(torch.cat(stages[final]), v["layer_out"], F32_TOL)
        ctx.clear()


def test_embedded_attention_and_norm(embedded):
    lm, enc, ctxs, mv = embedded
    a = analysis(lm, enc, ["attention", "norm"])
    for layer, v in enumerate(mv):
        np.testing.assert_allclose(a["attention"][layer], v["attn"].numpy(), rtol=1e-6, atol=1e-7)
        f = independent_head_vectors(lm, layer, v["value"]).double()
        expected = v["attn"].double() * f.norm(dim=-1)[:, None, :]
        np.testing.assert_allclose(a["norm"][layer], expected.numpy(), rtol=1e-4, atol=1e-5 * expected.max().item())


def test_embedded_float32_norm_family_matches_float64(embedded):
    """The float32 norm family (compiled kernels on CPU) against float64 arithmetic on the same records (torch
    path): the maps add no more than float32 rounding (measured ≤ 3.5e-7 elementwise; bound 2e-6)."""
    lm, enc, ctxs, mv = embedded
    keys = list(KEYS)
    for layer, ctx in enumerate(ctxs):
        rec = ctx.rec
        r64 = dataclasses.replace(
            rec,
            **{
                f.name: getattr(rec, f.name).double()
                for f in dataclasses.fields(rec)
                if isinstance(getattr(rec, f.name), torch.Tensor)
            },
        )
        view = LayerDecomposition(rec, lm.layer_params(layer), index=layer)
        got = norm_family_run([view], keys, backend([view]))
        ref = norm_family_run(
            [LayerDecomposition(r64, lm.layer_params(layer), index=layer, use_kernel=False)], keys, "torch"
        )
        for k in keys:
            y = ref[k][0]
            big = y > 1e-6 * y.max()
            rel = ((got[k][0].double() - y).abs()[big] / y[big]).max()
            assert rel < 2e-6, (k, layer, float(rel))
