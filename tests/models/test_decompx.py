"""DecompX (issue 10, item 4): completeness against the model's own forward pass on tiny float64 models of
every family it supports, an independent plain implementation (tests/helpers/decompx_naive.py) at 1e-9,
refusals (gated FF, cost) before anything runs, and the absdot bias split."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
import normviz.methods
from normviz.core.errors import NotApplicableError, TooCostlyError
from normviz.methods.decompx import decompx_vectors, split_bias

from ..helpers import tiny
from ..helpers.decompx_naive import naive_decompx

SUPPORTED = ["bert", "roberta", "electra", "distilbert", "gpt2"]


def _session(lm, enc, options=None):
    return normviz.Session.from_encoded(lm, [enc], options=options)[0]


def _layer_outputs(lm, ids) -> list[torch.Tensor]:
    """Each layer's output in a plain forward pass of the model (hooks on the layer modules)."""
    outs = []
    hooks = [
        layer.register_forward_hook(lambda m, a, o: outs.append((o[0] if isinstance(o, tuple) else o)[0]))
        for layer in lm.layers
    ]
    try:
        with torch.no_grad():
            lm.model(input_ids=torch.tensor([ids]))
    finally:
        for h in hooks:
            h.remove()
    return outs


@pytest.mark.parametrize("arch", SUPPORTED)
def test_parts_sum_to_every_layer_output(tiny_model, arch):
    lm = tiny_model(arch)
    enc = tiny.encoded(n=9)
    s = _session(lm, enc)
    real = _layer_outputs(lm, enc.ids)
    views = s.layers()
    for l, X in enumerate(decompx_vectors(views)):
        err = float((X.sum(1) - real[l]).abs().max() / real[l].abs().max())
        assert err < 1e-12, (arch, l, err)
    a = s.get(["decompx"])["decompx"]
    assert a.shape == (lm.n_layers, 9, 9) and np.isfinite(a).all() and (a >= 0).all()
    if lm.spec.causal:  # no part of a later token in an earlier one
        assert np.abs(np.triu(a, 1)).max() == 0


@pytest.mark.parametrize("arch", ["bert", "roberta", "electra", "gpt2"])
def test_matches_the_plain_implementation(tiny_model, arch):
    lm = tiny_model(arch)
    enc = tiny.encoded(n=11, seed=3)
    ours = [X.clone() for X in decompx_vectors(_session(lm, enc).layers())]
    ref, outs = naive_decompx(lm.model, enc.ids)
    for l in range(lm.n_layers):
        assert np.abs(ref[l].sum(1) - outs[l]).max() < 1e-10 * np.abs(outs[l]).max()  # the reference is complete too
        err = float(np.abs(ours[l].numpy() - ref[l]).max() / np.abs(ref[l]).max())
        assert err < 1e-9, (arch, l, err)
    norms = _session(lm, enc).get(["decompx"])["decompx"]
    assert np.abs(norms - np.linalg.norm(np.stack(ref), axis=-1)).max() < 1e-9 * norms.max()


def test_minilm_matches_the_plain_implementation():
    lm = normviz.load("minilm", dtype="float64")
    s = normviz.Session(lm, "The cat sat on the mat because it was warm.")
    a = s.get(["decompx"])
    ref, _ = naive_decompx(lm.model, s.encoded.ids)
    ref_norms = np.linalg.norm(np.stack(ref), axis=-1)
    err = float(np.abs(a["decompx"] - ref_norms).max() / ref_norms.max())
    print(f"minilm decompx vs plain implementation: rel {err:.1e}")
    assert err < 1e-9
    assert "absdot" in a.notes["decompx"] and "GeLU_ZO" in a.notes["decompx"]


def test_the_first_layer_value_bias_goes_with_its_token(tiny_model):
    """Footnote 4: in layer 1, b^V rides on α_ij to token j; merging it into b^O and splitting it by absdot
    (what later layers do) is also complete but gives other parts, so the choice is visible."""
    from dataclasses import replace

    from normviz.methods.decompx import propagate
    from normviz.record.decompose import LayerDecomposition

    lm = tiny_model("bert")
    ctx = _session(lm, tiny.encoded(n=9)).layers()[0]
    kept = next(iter(decompx_vectors([ctx]))).clone()
    p = ctx.p
    merged = LayerDecomposition(ctx.rec, replace(p, b_v=None, b_o=p.b_o + p.b_v @ p.w_o))
    X = torch.zeros_like(kept)
    X[torch.arange(9), torch.arange(9)] = ctx.rec.x
    split = propagate(merged, X, first=True)
    assert torch.allclose(split.sum(1), kept.sum(1), atol=1e-12)  # both complete
    assert (split - kept).abs().max() > 1e-3  # but different parts


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_gated_models_are_refused(tiny_model, arch):
    lm = tiny_model(arch)
    s = _session(lm, tiny.encoded(n=7))
    with pytest.raises(NotApplicableError, match="gated FF"):
        s.get(["decompx"])
    assert s.forward_passes == 0
    assert "decompx" not in s.get().arrays


def test_opt_in_and_cost_budget(tiny_model):
    lm = tiny_model("bert")
    s = _session(lm, tiny.encoded(n=9), options={"decompx_budget_s": 1e-9})
    assert normviz.methods.is_opt_in("decompx")
    assert "decompx" not in s.get().arrays  # not computed by default
    with pytest.raises(TooCostlyError, match="decompx_budget_s"):
        s.get(["decompx"])
    from normviz.methods.cost import RATES, token_limit
    from normviz.methods.decompx import flops

    FLOPS_PER_SECOND = RATES["decompx"]
    request = s.request
    fits = token_limit(request, 1.0 * FLOPS_PER_SECOND["cpu"], flops)  # a 1 s budget
    assert flops(type(request)(**{**request.__dict__, "n_tokens": fits})) <= FLOPS_PER_SECOND["cpu"]
    assert f"up to about {token_limit(request, 1e-9 * FLOPS_PER_SECOND['cpu'], flops)} tokens" in s.refusal("decompx")
    assert "decompx" in (s.refusal("decompx") or "")
    fresh = _session(lm, tiny.encoded(n=9), options={"decompx_budget_s": 1e-9})
    with pytest.raises(TooCostlyError):
        fresh.get(["decompx"])
    assert fresh.forward_passes == 0  # refused before the recording pass


def test_row_chunks_do_not_change_the_result(tiny_model):
    lm = tiny_model("roberta")
    enc = tiny.encoded(n=10)
    whole = _session(lm, enc).get(["decompx"])["decompx"]
    chunked = _session(lm, enc, options={"chunk_bytes": 2048}).get(["decompx"])["decompx"]
    assert np.abs(whole - chunked).max() < 1e-13 * whole.max()


def test_absdot_split():
    g = torch.Generator().manual_seed(0)
    parts = torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    bias = torch.randn(4, generator=g, dtype=torch.float64)
    parts[1] = 0  # a row with no parts: the bias goes to the token itself (global row 1 + 2 = 3)
    before = parts.clone()
    split_bias(parts, bias, slice(2, 5))
    assert torch.allclose(parts.sum(1), before.sum(1) + bias, atol=1e-14)  # the bias is split exactly
    w = (parts - before)[0] @ bias / (bias @ bias)
    dots = (before[0] @ bias).abs()
    assert torch.allclose(w, dots / dots.sum(), atol=1e-14)
    assert torch.equal(parts[1, 3], bias) and parts[1].abs().sum() == bias.abs().sum()
