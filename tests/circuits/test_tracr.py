"""Issue 41: the Tracr-compiled benchmarks (scripts/compile_tracr.py; tracr itself is never needed here).

Each ships a GPT-2-shaped model whose weights are Tracr's compiled program beside side programs. Checked on the
shipped weights: the LayerNorms are identities (to float precision), the model reads the program's answer with
logit 1 and every other output value 0, normviz's exact decompositions (direct parts, sources, the graph's heads)
sum to the model's logit difference in float64, and the circuit read from the RASP graph is real by ablation
(the common test in test_circuits.py), the side programs' heads changing nothing at all."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from normviz import circuits
from normviz.session.session import Session

EXPECTED = {
    "tracr_reverse": {(0, 0), (3, 0)},  # length's SelectorWidth head, the Aggregate reading token[opp_idx]
    "tracr_pattern": {(1, 0), (1, 1)},  # the two shift_by heads
}
pytestmark = pytest.mark.skipif(
    not set(EXPECTED) <= set(circuits.names()), reason="the Tracr benchmarks are not shipped"
)


@pytest.fixture(scope="module", params=sorted(EXPECTED))
def bench64(request):
    """The benchmark with its model in float64 (the shipped float32 weights, upcast)."""
    import transformers as tf

    from normviz.models.loading import from_model

    bench = circuits.load(request.param)
    folder = circuits.ASSETS / request.param
    model = tf.AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float64)
    return bench, from_model(model, bench.lm.tokenizer, name=f"circuit:{request.param}:f64")


def test_the_circuit_is_the_compiled_programs_heads(bench64):
    bench, _ = bench64
    assert bench.circuit == EXPECTED[bench.name]
    main = bench.name.removeprefix("tracr_")
    by_head = {tuple(h): role for role, heads in bench.roles.items() for h in heads}
    assert all(by_head[h].startswith(f"{main}:") for h in bench.circuit), by_head
    others = [h for h in by_head if h not in bench.circuit]
    assert len(others) >= len(bench.circuit) and all(not by_head[h].startswith(f"{main}:") for h in others)
    assert bench.lm.model_type == "gpt2" and bench.info["tracr"]["max_abs_difference"] <= 1e-4


def test_the_layernorms_are_identities(bench64):
    _, lm = bench64
    seen = []

    def hook(module, args, out):
        seen.append(float((out - args[0]).abs().max() / args[0].abs().max()))

    norms = [m for name, m in lm.model.named_modules() if name.endswith(("ln_1", "ln_2", "ln_f"))]
    handles = [m.register_forward_hook(hook) for m in norms]
    try:
        for ids, _, _ in circuits.load(lm.name.split(":")[1]).examples[:4]:
            with torch.no_grad():
                lm.model(input_ids=torch.tensor([ids]))
    finally:
        for h in handles:
            h.remove()
    assert len(seen) == 4 * len(norms) and max(seen) <= 1e-9, max(seen)


def test_the_logits_are_the_output_subspace(bench64):
    """The answer's logit is 1 and every other token's 0 (to Tracr's own precision), on every example."""
    bench, lm = bench64
    for ids, token, foil in bench.examples:
        with torch.no_grad():
            logits = lm.head_model(input_ids=torch.tensor([ids])).logits[0, -1].numpy()
        want = np.zeros_like(logits)
        want[token] = 1.0
        np.testing.assert_allclose(logits, want, atol=1e-5)


def test_the_exact_decompositions_sum_to_the_logit(bench64):
    bench, lm = bench64
    for ids, token, foil in bench.examples[:6]:
        s = Session.from_encoded(lm, [circuits.encoded(lm, ids)])[0]
        with torch.no_grad():
            logits = lm.head_model(input_ids=torch.tensor([ids])).logits[0, -1]
        model = float(logits[token] - logits[foil])
        e = s.explain(token, foil)
        assert e.total == pytest.approx(model, abs=1e-9)
        direct = e.heads.sum() + e.attn_bias.sum() + e.ff.sum() + e.embedding + e.final_bias
        assert direct == pytest.approx(e.total, abs=1e-9)
        assert float(e.sources.sum()) + e.bias == pytest.approx(e.total, abs=1e-9)
        # only circuit heads write the answer directly; the side programs' heads write nothing it reads
        heads = np.abs(np.asarray(e.heads).sum(-1))
        outside = [heads[l, h] for l in range(lm.n_layers) for h in range(lm.n_heads) if (l, h) not in bench.circuit]
        assert max(outside) <= 1e-9


def test_the_side_programs_change_nothing_and_each_circuit_head_is_needed(bench64):
    bench, _ = bench64
    others = [h for h in bench.heads if h not in bench.circuit]
    got = circuits.ablated(bench.lm, bench.examples, [others] + [[h] for h in sorted(bench.circuit)])
    np.testing.assert_allclose(got[:, 1], got[:, 0], atol=1e-5)  # every non-circuit head at once: no change
    removed = 1 - got[:, 2:].mean(0) / got[:, 0].mean()
    assert removed.min() >= 0.5, removed  # each circuit head alone removes at least half
