"""Issue 41: EAP and EAP-IG edge scores (normviz.attribution.eap).

- EAP of an edge equals the first-order effect of patching that edge, computed by hand on a tiny float64 GPT-2:
  the receiver's own input moved by g · W^O_u(o'_u − o_u) through hooks written here (into a later head: only that
  head's q, k, v read the moved input; into an FF block: its norm's input; into the logits: the final norm's
  input), dF/dg by central differences of the real patched passes.
- Every head's edges sum to its node score: AtP's delta (EAP) and eap_ig's delta (EAP-IG, the same m).
- EAP-IG converges as m grows: its completeness gap shrinks like the midpoint rule's (≈ 1/m²).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import normviz
from normviz.attribution import eap
from normviz.core.errors import NormvizError

from ..helpers import tiny


def _session(lm, enc, options=None):
    return normviz.Session.from_encoded(lm, [enc], options=options)[0]


TOKEN, FOIL, POS = 7, 13, 5


class _Gpt2Patch:
    """Hand-made edge patching on a GPT-2 LMHeadModel: the receiver's input + g · delta."""

    def __init__(self, lm, ids):
        self.hm, self.ids = lm.head_model, torch.tensor([ids])
        self.blocks = self.hm.transformer.h
        self.H = self.hm.config.n_head
        self.d = self.hm.config.n_embd
        self.dh = self.d // self.H
        self.o = {}
        handles = [
            b.attn.c_proj.register_forward_pre_hook(lambda m, a, l=l: self.o.__setitem__(l, a[0][0].detach().clone()))
            for l, b in enumerate(self.blocks)
        ]
        try:
            with torch.no_grad():
                self.hm(input_ids=self.ids)
        finally:
            for h in handles:
                h.remove()

    def delta(self, l, h):
        """W^O_h (0 − o_h): the sender's write moved to zero ablation, [n, d]."""
        proj = self.blocks[l].attn.c_proj
        z = torch.zeros_like(self.o[l])
        z[:, h * self.dh : (h + 1) * self.dh] = self.o[l][:, h * self.dh : (h + 1) * self.dh]
        return -(proj(z) - proj.bias)

    def score(self, receiver, delta, g):
        handles = []
        kind = receiver[0]
        if kind == "logits":
            handles.append(self.hm.transformer.ln_f.register_forward_pre_hook(lambda m, a: (a[0] + g * delta,)))
        elif kind == "ff":
            handles.append(self.blocks[receiver[1]].ln_2.register_forward_pre_hook(lambda m, a: (a[0] + g * delta,)))
        else:
            _, l2, h2 = receiver
            block, state = self.blocks[l2], {}

            def keep_x(m, args, kwargs):
                state["x"] = args[0] if args else kwargs["hidden_states"]

            def patch(m, args, out):
                if state.get("inside"):
                    return out
                state["inside"] = True
                try:
                    moved = m(block.ln_1(state["x"] + g * delta))
                finally:
                    state["inside"] = False
                out = out.clone()
                for part in range(3):  # q | k | v columns of head h2
                    cols = slice(part * self.d + h2 * self.dh, part * self.d + (h2 + 1) * self.dh)
                    out[..., cols] = moved[..., cols]
                return out

            handles.append(block.register_forward_pre_hook(keep_x, with_kwargs=True))
            handles.append(block.attn.c_attn.register_forward_hook(patch))
        try:
            with torch.no_grad():
                logits = self.hm(input_ids=self.ids).logits[0, POS].double()
        finally:
            for x in handles:
                x.remove()
        return float(logits[TOKEN] - logits[FOIL])

    def first_order_loss(self, sender, receiver, eps=1e-5):
        delta = self.delta(*sender)
        up, down = self.score(receiver, delta, eps), self.score(receiver, delta, -eps)
        return -(up - down) / (2 * eps)


@pytest.fixture(scope="module")
def gpt2():
    lm = tiny.build_with_head("gpt2")
    enc = tiny.encoded(n=7, seed=3)
    return lm, enc


def test_eap_of_an_edge_is_the_first_order_effect_of_patching_it(gpt2):
    lm, enc = gpt2
    e = eap.edges(_session(lm, enc), token=TOKEN, foil=FOIL, position=POS)
    ref = _Gpt2Patch(lm, enc.ids)
    assert e.heads.shape == (2, lm.n_heads, 2, lm.n_heads) and e.ff.shape == (2, lm.n_heads, 2)
    checked = []
    for sender, receiver, got in [
        ((0, 1), ("head", 1, 2), e.heads[0, 1, 1, 2]),
        ((0, 3), ("head", 1, 0), e.heads[0, 3, 1, 0]),
        ((0, 2), ("ff", 0), e.ff[0, 2, 0]),
        ((0, 0), ("ff", 1), e.ff[0, 0, 1]),
        ((1, 1), ("ff", 1), e.ff[1, 1, 1]),
        ((0, 2), ("logits",), e.logits[0, 2]),
        ((1, 3), ("logits",), e.logits[1, 3]),
    ]:
        want = ref.first_order_loss(sender, receiver)
        checked.append(abs(want))
        assert got == pytest.approx(want, rel=1e-6, abs=1e-8), (sender, receiver)
    assert max(checked) > 1e-2  # the edges checked are not trivially 0
    # edges that do not exist are nan: a head into its own or an earlier layer, into an earlier FF
    assert np.isnan(e.heads[1, 0, 1, 2]) and np.isnan(e.heads[1, 0, 0, 2]) and np.isnan(e.ff[1, 0, 0])
    assert np.isfinite(e.heads[0, :, 1]).all() and e.kind == "EAP, zero ablation"


@pytest.mark.parametrize("arch,tol", [("gpt2", 1e-10), ("gpt_neox", 1e-10), ("llama", 1e-5), ("qwen2", 1e-5)])
def test_edges_sum_to_the_node_scores(arch, tol):
    """Σ over a head's edges = AtP (EAP) and = eap_ig (EAP-IG, same steps). Llama and Qwen2 run their norms and
    softmax in float32, hence 1e-5 of the scale there; qwen2's grouped K/V are split per query head."""
    lm = tiny.build_with_head(arch)
    enc = tiny.encoded(n=7, seed=3)
    s = _session(lm, enc)
    e = eap.edges(s, token=TOKEN, foil=FOIL)
    a = s.atp(token=TOKEN, foil=FOIL)
    scale = max(1.0, np.abs(a.delta).max())
    assert np.abs(e.node() - a.delta).max() <= tol * scale
    g = eap.edges(s, token=TOKEN, foil=FOIL, steps=8)
    ig = s.eap_ig(token=TOKEN, foil=FOIL, steps=8)
    assert np.abs(g.node() - ig.delta).max() <= tol * max(1.0, np.abs(ig.delta).max())
    assert g.gap == pytest.approx(ig.gap, abs=tol * scale * lm.n_layers * lm.n_heads)
    assert np.nanmax(np.abs(g.heads)) > 1e-3  # head-to-head edges carry something
    if lm.spec.parallel:  # a parallel block's FF reads the layer input, not its own heads
        assert np.isnan(e.ff[0, :, 0]).all() and np.isfinite(e.ff[0, :, 1]).all()


def test_eap_ig_converges_as_steps_grow(gpt2):
    """The midpoint rule's gap to the exact integral (total − all ablated) shrinks ≈ 16× per 4× steps; the edge
    scores themselves settle (the change from m to 4m shrinks too)."""
    lm, enc = gpt2
    s = _session(lm, enc)
    runs = {m: eap.edges(s, token=TOKEN, foil=FOIL, position=POS, steps=m) for m in (4, 16, 64)}
    gaps = [abs(runs[m].gap) for m in (4, 16, 64)]
    assert gaps[0] > 1e-4
    assert gaps[1] < gaps[0] / 6 and gaps[2] < gaps[1] / 6, gaps
    step1 = np.nanmax(np.abs(runs[16].heads - runs[4].heads))
    step2 = np.nanmax(np.abs(runs[64].heads - runs[16].heads))
    assert step2 < step1 / 6
    assert runs[64].total == pytest.approx(runs[4].total) and runs[64].passes >= 2


def test_mean_ablation_and_refusals(gpt2):
    lm, enc = gpt2
    from normviz.attribution.knockout import head_means_of

    means = head_means_of(lm, [tiny.encoded(n=5, seed=7), tiny.encoded(n=8, seed=8)])
    s = _session(lm, enc)
    e = eap.edges(s, token=TOKEN, foil=FOIL, ablation="mean", means=means)
    a = s.atp(token=TOKEN, foil=FOIL, ablation="mean", means=means)
    assert np.abs(e.node() - a.delta).max() <= 1e-10 * max(1.0, np.abs(a.delta).max())
    with pytest.raises(NormvizError, match="at least 1 step"):
        eap.edges(s, steps=0)
    with pytest.raises(NormvizError, match="budget|seconds"):
        eap.edges(_session(lm, enc, options={"head_ablation_budget_s": 1e-9}), steps=4)
