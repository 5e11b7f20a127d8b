"""An independent, deliberately plain DecompX (Modarressi et al. 2023) for the tests: numpy float64, loops over
rows and heads, written from the Hugging Face modules of a BERT-style encoder (BERT, RoBERTa, ELECTRA:
``encoder.layer``) or GPT-2 (``h``), not from normviz's parameter views. The real pre-norm vectors and FF
pre-activations come from forward hooks on the model's own modules."""

from __future__ import annotations

import numpy as np
import torch


def _np(t) -> np.ndarray:
    return t.detach().to(torch.float64).numpy()


def absdot(parts: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """parts [n, e] of one row + bias split by |⟨part_k, bias⟩| (the weights sum to 1)."""
    w = np.abs(parts @ bias)
    assert w.sum() > 0
    return parts + np.outer(w / w.sum(), bias)


def layernorm_parts(parts: np.ndarray, z: np.ndarray, gamma, beta, eps) -> np.ndarray:
    """LayerNorm of one row's parts, scale from the real input z, β split by absdot."""
    s = np.sqrt(((z - z.mean()) ** 2).mean() + eps)
    out = (parts - parts.mean(-1, keepdims=True)) / s * gamma
    return absdot(out, beta)


def _linear(mod, conv1d: bool):
    """(W [in, out], b) of nn.Linear or GPT-2's Conv1D."""
    w = _np(mod.weight)
    return (w if conv1d else w.T), _np(mod.bias)


def _layer_pieces(model, index: int):
    """The modules of layer `index` as plain arrays, and whether it is pre-LN."""
    if hasattr(model, "h"):  # GPT-2
        blk = model.h[index]
        d = blk.ln_1.weight.shape[0]
        w_qkv, b_qkv = _linear(blk.attn.c_attn, True)
        return dict(
            pre=True,
            heads=blk.attn.num_heads,
            wv=w_qkv[:, 2 * d :],
            bv=b_qkv[2 * d :],
            wo_b=_linear(blk.attn.c_proj, True),
            ln1=blk.ln_1,
            ln2=blk.ln_2,
            w1_b=_linear(blk.mlp.c_fc, True),
            w2_b=_linear(blk.mlp.c_proj, True),
            act=blk.mlp.act,
            first_in=blk.mlp.c_fc,
        ), blk
    blk = model.encoder.layer[index]
    wv, bv = _linear(blk.attention.self.value, False)
    return dict(
        pre=False,
        heads=blk.attention.self.num_attention_heads,
        wv=wv,
        bv=bv,
        wo_b=_linear(blk.attention.output.dense, False),
        ln1=blk.attention.output.LayerNorm,
        ln2=blk.output.LayerNorm,
        w1_b=_linear(blk.intermediate.dense, False),
        w2_b=_linear(blk.output.dense, False),
        act=blk.intermediate.intermediate_act_fn,
        first_in=blk.intermediate.dense,
    ), blk


@torch.no_grad()
def naive_decompx(model, ids) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(parts X^l [n, n, d] per layer, the model's layer outputs [n, d]) for one sequence."""
    n_layers = len(model.h) if hasattr(model, "h") else len(model.encoder.layer)
    pieces = [_layer_pieces(model, l) for l in range(n_layers)]
    seen: dict = {}
    hooks = []
    for l, (pc, blk) in enumerate(pieces):
        hooks.append(pc["ln1"].register_forward_pre_hook(lambda m, a, l=l: seen.__setitem__((l, "z1"), _np(a[0][0]))))
        hooks.append(pc["ln2"].register_forward_pre_hook(lambda m, a, l=l: seen.__setitem__((l, "z2"), _np(a[0][0]))))
        hooks.append(pc["first_in"].register_forward_hook(lambda m, a, o, l=l: seen.__setitem__((l, "h"), _np(o[0]))))
        hooks.append(
            blk.register_forward_hook(
                lambda m, a, o, l=l: seen.__setitem__((l, "out"), _np((o[0] if isinstance(o, tuple) else o)[0]))
            )
        )
    try:
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, output_hidden_states=True)
    finally:
        for h in hooks:
            h.remove()
    x0 = _np(out.hidden_states[0][0])
    n, d = x0.shape
    X = np.zeros((n, n, d))
    for k in range(n):
        X[k, k] = x0[k]
    parts_per_layer, outputs = [], []
    for l, (pc, _) in enumerate(pieces):
        H = pc["heads"]
        dh = d // H
        alpha = _np(out.attentions[l][0])
        wo, bo = pc["wo_b"]
        w1, b1 = pc["w1_b"]
        w2, b2 = pc["w2_b"]
        ln1 = [_np(pc["ln1"].weight), _np(pc["ln1"].bias), pc["ln1"].eps]
        ln2 = [_np(pc["ln2"].weight), _np(pc["ln2"].bias), pc["ln2"].eps]
        h_real = seen[(l, "h")]
        theta = _np(pc["act"](torch.tensor(h_real))) / h_real
        # the parts the values are taken from (pre-LN: through LN1, scale from the real layer input)
        if pc["pre"]:
            src = np.stack([layernorm_parts(X[j], seen[(l, "z1")][j], *ln1) for j in range(n)])
        else:
            src = X
        V = src @ pc["wv"]  # [j, k, d]
        if l == 0:
            for j in range(n):
                V[j, j] += pc["bv"]  # first layer: the value bias inside f(x_j)
        bias = bo if l == 0 else bo + pc["bv"] @ wo
        new = np.zeros_like(X)
        for i in range(n):
            attn = np.zeros((n, d))
            for h in range(H):
                cols = slice(h * dh, (h + 1) * dh)
                mixed = np.einsum("j,jkv->kv", alpha[h, i], V[:, :, cols])
                attn += mixed @ wo[cols]
            u = absdot(attn + X[i], bias)
            z_ln = seen[(l, "z2")][i] if pc["pre"] else seen[(l, "z1")][i]
            g = ln2 if pc["pre"] else ln1
            ell = layernorm_parts(u, z_ln, *g)
            hid = absdot(ell @ w1, b1) * theta[i]
            ff = absdot(hid @ w2, b2)
            if pc["pre"]:
                new[i] = u + ff
            else:
                new[i] = layernorm_parts(ell + ff, seen[(l, "z2")][i], *ln2)
        X = new
        parts_per_layer.append(X.copy())
        outputs.append(seen[(l, "out")])
    return parts_per_layer, outputs
