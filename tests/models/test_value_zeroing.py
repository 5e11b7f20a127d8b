"""Value zeroing (Mohebbi et al. 2023) against an independent route: whole-model reruns, one token at a time."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz.methods import registry
from normviz.models.params import get_path
from normviz.session.session import resolve_keys

from ..helpers.maps import analyses, analysis
from ..helpers.tiny import ARCHS, encoded


@torch.no_grad()
def naive_value_zeroing(lm, ids: list[int], layer: int) -> np.ndarray:
    """The authors' recipe done the slow way: for each j, run the *whole model* (batch of one) with a hook that
    zeroes token j's value vectors (all heads) in layer `layer`, read that layer's output, and compare it
    by cosine distance with an unmodified run; columns j, normalised per receiving token i."""
    layer_mod = lm.layers[layer]
    vmod = get_path(layer_mod, lm.spec.value)
    p = lm.layer_params(layer)
    width = p.n_kv_heads * p.head_dim
    start = 2 * p.n_heads * p.head_dim if lm.spec.qkv_layout == "fused_qkv" else 0  # q | k | v
    n = len(ids)
    grabbed = {}

    def grab(module, args, output):
        grabbed["out"] = (output[0] if isinstance(output, tuple) else output)[0].clone()

    def run(zero: int | None):
        def zero_hook(module, args, output):
            if zero is None:
                return None
            output = output.clone()
            output[0, zero, start : start + width] = 0
            return output

        h1 = vmod.register_forward_hook(zero_hook)
        h2 = layer_mod.register_forward_hook(grab)
        try:
            lm.model(input_ids=torch.tensor([ids]))
        finally:
            h1.remove()
            h2.remove()
        return grabbed["out"]

    base = run(None)
    d = np.zeros((n, n))
    for j in range(n):
        out = run(j)
        cos = torch.nn.functional.cosine_similarity(out, base, dim=-1)
        d[:, j] = (1 - cos).numpy()
    d = np.clip(d, 0, None)
    return d / d.sum(1, keepdims=True)


@pytest.mark.parametrize("arch", ARCHS)
def test_value_zeroing_matches_whole_model_reruns(tiny_model, arch):
    lm = tiny_model(arch)
    enc = encoded(n=7)
    a = analysis(lm, enc, ["value_zeroing"])
    vz = a["value_zeroing"]
    assert vz.shape == (lm.n_layers, 7, 7)
    np.testing.assert_allclose(vz.sum(-1), 1, atol=1e-12)
    assert np.all(vz >= 0)
    for layer in range(lm.n_layers):
        np.testing.assert_allclose(vz[layer], naive_value_zeroing(lm, enc.ids, layer), rtol=1e-7, atol=1e-10)
    if lm.spec.placement == "pre":
        assert np.all(np.triu(vz, 1) == 0)  # a token's output never depends on later tokens' values


def test_batch_is_chunked_under_a_memory_budget(tiny_model):
    lm = tiny_model("gpt2")
    enc = encoded(n=9)
    full = analysis(lm, enc, ["value_zeroing"])["value_zeroing"]
    tiny = analysis(lm, enc, ["value_zeroing"], options={"value_zeroing_chunk_bytes": 1})
    np.testing.assert_allclose(tiny["value_zeroing"], full, rtol=1e-12, atol=1e-14)


def test_value_zeroing_is_opt_in_and_flow_too(tiny_model):
    lm = tiny_model("bert")
    defaults = resolve_keys(lm, None)
    assert "value_zeroing" not in defaults and "flow" not in defaults
    for key in (
        "rollout_attention",
        "rollout_attn_res_ln",
        "alti",
        "rollout_alti",
        "effective_attention",
        "rollout_ff_res_ln",
    ):
        assert key in defaults
    assert registry.is_opt_in("value_zeroing") and registry.is_opt_in("flow")
    assert registry.family_of("value_zeroing").needs_model
    assert "value_zeroing" in resolve_keys(lm, ["value_zeroing"])


# Llama's eager attention takes its softmax in float32 even in a float64 model, and torch's CPU softmax rounds
# a row shorter than one SIMD vector (AVX2: 8 float32, AVX-512: 16) differently from the same row padded past
# that width (it sums the one in order, the other lane-wise then across lanes): the padded sequence's α, the
# model's own in that batch, differs from its single run by float32 ulps of α (absolute: α ≤ 1), e.g. 5 tokens
# padded to 10 on an AVX2 machine. Its maps agree to that relative to each map's scale (measured 3.6e-7 of it),
# not relative to each (possibly tiny) entry (alti: 3.2e-6 at an entry of 4.7e-4). The unpadded sequence's rows
# keep their length: it equals its single run to float64 rounding.
@pytest.mark.parametrize("arch, padded_tol", [("bert", 0.0), ("llama", 2e-6)])
def test_new_maps_in_a_padded_batch_equal_single_runs(tiny_model, arch, padded_tol):
    """Right-padded batches: every new key of each sequence equals its own single run."""
    keys = [
        "rollout_attention",
        "rollout_attn_res_ln",
        "effective_attention",
        "alti",
        "rollout_alti",
        "value_zeroing",
        "flow",
    ]
    lm = tiny_model(arch)
    encs = [encoded(n=5, seed=3), encoded(n=10, seed=4)]
    batch = analyses(lm, encs, keys)
    longest = max(len(e.ids) for e in encs)
    for enc, got in zip(encs, batch):
        single = analysis(lm, enc, keys)
        scaled = padded_tol if len(enc.ids) < longest else 0.0
        for key in keys:
            atol = max(1e-12, scaled * float(np.abs(single[key]).max()))
            np.testing.assert_allclose(got[key], single[key], rtol=1e-9, atol=atol, err_msg=f"{arch} {key}")
