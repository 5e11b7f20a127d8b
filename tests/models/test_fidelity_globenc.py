"""GlobEnc (issue 10, item 3), the value-zeroing rollout and effective attention's value-bias option (items
5, 6), against independent implementations written here from the model's weights and forward pass, in the
way the authors' code computes them. Tiny random float64 models built in this file (weights from
tests/helpers/tiny.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import transformers as tf

import normviz
from normviz.core.errors import NotApplicableError
from normviz.core.tokens import Encoded

from ..helpers.tiny import randomize_weights


def _tiny(config):
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    model = tf.AutoModel.from_config(config, attn_implementation="eager").to(torch.float64).eval()
    randomize_weights(model)
    return normviz.from_model(model, None, name="tiny")


def _bert(layers=3):
    return _tiny(
        tf.BertConfig(
            vocab_size=97,
            hidden_size=32,
            num_hidden_layers=layers,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    )


def _session(lm, ids, options=None):
    enc = Encoded(
        ids=list(ids), tokens=[str(i) for i in ids], labels=[str(i) for i in ids], special=[False] * len(ids), dropped=0
    )
    return normviz.Session.from_encoded(lm, [enc], options=options)[0]


IDS = [5, 17, 33, 8, 61, 9, 40, 12, 7, 90, 3, 44]  # n = 12 > head size 8


@torch.no_grad()
def globenc_reference(model, ids) -> tuple[np.ndarray, np.ndarray]:
    """N-Enc per layer and its raw rollout, as GlobEnc's modeling_bert.py: full [n, n, d] per-pair vectors."""
    layers = model.encoder.layer
    z1, z2 = {}, {}
    hooks = []
    for i, layer in enumerate(layers):
        hooks.append(
            layer.attention.output.LayerNorm.register_forward_pre_hook(lambda m, a, i=i: z1.__setitem__(i, a[0][0]))
        )
        hooks.append(layer.output.LayerNorm.register_forward_pre_hook(lambda m, a, i=i: z2.__setitem__(i, a[0][0])))
    out = model(input_ids=torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    for h in hooks:
        h.remove()
    maps = []
    n = len(ids)
    for i, layer in enumerate(layers):
        x, alpha = out.hidden_states[i][0], out.attentions[i][0]
        H, d = alpha.shape[0], x.shape[-1]
        value = layer.attention.self.value(x).reshape(n, H, d // H).transpose(0, 1)  # bias b^V inside
        dense = layer.attention.output.dense.weight.view(d, H, d // H)
        f = torch.einsum("hsv,dhv->hsd", value, dense)
        summed = torch.einsum("hks,hsd->ksd", alpha, f)
        u = summed + torch.einsum("sk,sd->skd", torch.eye(n, dtype=x.dtype), x)
        ln1, ln2 = layer.attention.output.LayerNorm, layer.output.LayerNorm
        var1 = (z1[i] - z1[i].mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True).unsqueeze(2)
        ell = (u - u.mean(-1, keepdim=True)) / (var1 + ln1.eps) ** 0.5 * ln1.weight
        var2 = (z2[i] - z2[i].mean(-1, keepdim=True)).pow(2).mean(-1, keepdim=True).unsqueeze(2)
        g = (ell - ell.mean(-1, keepdim=True)) / (var2 + ln2.eps) ** 0.5 * ln2.weight
        maps.append(g.norm(dim=-1).numpy())
    maps = np.stack(maps)
    roll = np.zeros_like(maps)
    roll[0] = maps[0]
    for l in range(1, len(maps)):
        roll[l] = maps[l].dot(roll[l - 1])
    return maps, roll


def _rel(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


def test_globenc_matches_the_authors_formulas():
    lm = _bert()
    a = _session(lm, IDS).get(["globenc_layer", "globenc"])
    maps, roll = globenc_reference(lm.model, IDS)
    e1, e2 = _rel(a["globenc_layer"], maps), max(_rel(a["globenc"][l], roll[l]) for l in range(len(roll)))
    assert e1 < 1e-12 and e2 < 1e-12, (e1, e2)
    assert "raw products" in a.notes["globenc"]
    # not the norm rollout: no row normalisation (rows do not sum to 1)
    assert np.abs(a["globenc"][-1].sum(-1) - 1).max() > 1e-3


def test_globenc_on_minilm_against_reference():
    lm = normviz.load("minilm", dtype="float64")
    s = normviz.Session(lm, "The cat sat on the mat because it was warm.")
    a = s.get(["globenc_layer", "globenc"])
    maps, roll = globenc_reference(lm.model, s.encoded.ids)
    e1, e2 = _rel(a["globenc_layer"], maps), max(_rel(a["globenc"][l], roll[l]) for l in range(len(roll)))
    print(f"minilm globenc_layer rel {e1:.1e}, globenc rel {e2:.1e}")
    assert e1 < 1e-9 and e2 < 1e-9


def test_globenc_refused_for_pre_ln():
    lm = _tiny(
        tf.GPT2Config(vocab_size=97, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0)
    )
    assert "globenc" not in normviz.all_keys("pre", include_opt_in=False)
    s = _session(lm, IDS)
    with pytest.raises(NotApplicableError, match="post-LN encoders"):
        s.get(["globenc"])
    assert "globenc" not in s.get().arrays  # default keys of a pre-LN model leave it out
    assert "post-LN encoders" in s.refusal("globenc_layer")


@torch.no_grad()
def value_zeroing_reference(model, ids) -> np.ndarray:
    """Mohebbi et al.'s demo: rerun each BERT layer with token t's value vector zeroed, cosine distance of
    the outputs, rows normalised."""
    out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    hs = out.hidden_states
    n = len(ids)
    scores = np.zeros((len(model.encoder.layer), n, n))
    for l, layer in enumerate(model.encoder.layer):
        for t in range(n):

            def zero(m, a, o, t=t):
                o = o.clone()
                o[:, t] = 0
                return o

            h = layer.attention.self.value.register_forward_hook(zero)
            new = layer(hs[l])[0][0] if isinstance(layer(hs[l]), tuple) else layer(hs[l])[0]
            h.remove()
            ref = hs[l + 1][0]
            cos = torch.nn.functional.cosine_similarity(new, ref, dim=-1)
            scores[l, :, t] = (1 - cos).numpy()
    return scores / scores.sum(-1, keepdims=True)


def test_rollout_value_zeroing_as_the_authors():
    lm = _bert()
    s = _session(lm, IDS[:7])
    assert "rollout_value_zeroing" not in s.get().arrays  # opt-in, like value_zeroing
    a = s.get(["rollout_value_zeroing"])
    vz = value_zeroing_reference(lm.model, IDS[:7])
    assert _rel(a["value_zeroing"], vz) < 1e-9
    joint = np.zeros_like(vz)  # compute_joint_attention(vz, res=False)
    joint[0] = vz[0]
    for l in range(1, len(vz)):
        joint[l] = vz[l].dot(joint[l - 1])
    err = max(_rel(a["rollout_value_zeroing"][l], joint[l]) for l in range(len(joint)))
    print(f"rollout_value_zeroing rel {err:.1e}")
    assert err < 1e-9


def _projection_reference(alpha, t, rtol=None):
    """α̃ = α·U_rU_rᵀ with U_r the left singular vectors of T above rtol·s_max (numpy)."""
    u, sv, _ = np.linalg.svd(t, full_matrices=False)
    tol = max(t.shape) * np.finfo(np.float64).eps if rtol is None else rtol
    r = int((sv > tol * sv[0]).sum())
    ur = u[:, :r]
    return alpha if r == t.shape[0] else alpha @ ur @ ur.T


@pytest.mark.parametrize("bias", [True, False])
def test_effective_value_bias_option(bias):
    lm = _bert(layers=2)
    s = _session(lm, IDS, options={"effective_value_bias": bias})
    a = s.get(["effective_attention", "attention"])
    assert ("value bias inside" if bias else "value bias left out") in a.notes["effective_attention"]
    with torch.no_grad():
        out = lm.model(input_ids=torch.tensor([IDS]), output_hidden_states=True)
    worst = 0.0
    for l, layer in enumerate(lm.model.encoder.layer):
        x = out.hidden_states[l][0]
        att = layer.attention
        H, d = lm.n_heads, x.shape[-1]
        v = x @ att.self.value.weight.T + (att.self.value.bias if bias else 0)
        v = v.reshape(len(IDS), H, d // H).transpose(0, 1)
        w_o = att.output.dense.weight.T.reshape(H, d // H, d)
        for h in range(H):
            t = (v[h] @ w_o[h]).numpy()
            ref = _projection_reference(a["attention"][l, h], t)
            worst = max(worst, float(np.abs(a["effective_attention"][l, h] - ref).max()))
    assert worst < 1e-9, worst
    other = _session(lm, IDS, options={"effective_value_bias": not bias}).get(["effective_attention"])
    assert np.abs(other["effective_attention"] - a["effective_attention"]).max() > 1e-6  # the option matters here
