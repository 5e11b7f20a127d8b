"""Independent computations for the prediction-attribution tests: a plain forward pass of the model with its
LM head, hooks on its own modules, and the formulas of issue 19 written out per family from the raw weights
(no normviz code)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class Pass:
    logits: torch.Tensor  # [n, V] the model's own
    attn: list[torch.Tensor]  # [H, n, n] per layer
    x_in: list[torch.Tensor]  # each layer's input [n, d]
    x_hat: list[torch.Tensor]  # each layer's attention input norm output [n, d]
    ff_out: list[torch.Tensor]  # each layer's FF block output [n, d]
    out: list[torch.Tensor]  # each layer's output
    final_in: torch.Tensor  # the final norm's input x^L


NAMES = {  # per family: layers, input norm, FF block, final norm, lm head
    "llama": ("model.layers", "input_layernorm", "mlp", "model.norm", "lm_head"),
    "qwen2": ("model.layers", "input_layernorm", "mlp", "model.norm", "lm_head"),
    "gpt2": ("transformer.h", "ln_1", "mlp", "transformer.ln_f", "lm_head"),
}


def _get(root, path):
    for p in path.split("."):
        root = getattr(root, p)
    return root


def family(model) -> str:
    return {"llama": "llama", "qwen2": "qwen2", "gpt2": "gpt2"}[model.config.model_type]


@torch.no_grad()
def run(model, ids: list[int]) -> Pass:
    fam = family(model)
    layers_path, norm1, ffp, final, _ = NAMES[fam]
    layers = _get(model, layers_path)
    rec: dict = {"x_in": [], "x_hat": [], "ff": [], "out": []}
    hooks = []
    for layer in layers:
        hooks.append(
            layer.register_forward_pre_hook(
                lambda m, a, k: rec["x_in"].append((k.get("hidden_states") if a == () else a[0])[0]), with_kwargs=True
            )
        )
        hooks.append(getattr(layer, norm1).register_forward_hook(lambda m, a, o: rec["x_hat"].append(o[0])))
        hooks.append(getattr(layer, ffp).register_forward_hook(lambda m, a, o: rec["ff"].append(o[0])))
        hooks.append(
            layer.register_forward_hook(lambda m, a, o: rec["out"].append((o[0] if isinstance(o, tuple) else o)[0]))
        )
    hooks.append(_get(model, final).register_forward_pre_hook(lambda m, a: rec.__setitem__("final", a[0][0])))
    try:
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return Pass(
        logits=out.logits[0],
        attn=[a[0] for a in out.attentions],
        x_in=rec["x_in"],
        x_hat=rec["x_hat"],
        ff_out=rec["ff"],
        out=rec["out"],
        final_in=rec["final"],
    )


def value_out(model, layer_index: int):
    """(W_V [d, KV·dh], b_V, W_O [H·dh, d], b_O) as row-vector matrices, from the raw modules."""
    fam = family(model)
    layer = _get(model, NAMES[fam][0])[layer_index]
    if fam == "gpt2":
        d = model.config.n_embd
        w, b = layer.attn.c_attn.weight, layer.attn.c_attn.bias  # Conv1D [in, out]: q | k | v
        return w[:, 2 * d :], b[2 * d :], layer.attn.c_proj.weight, layer.attn.c_proj.bias
    a = layer.self_attn
    return a.v_proj.weight.T, a.v_proj.bias, a.o_proj.weight.T, a.o_proj.bias


def final_norm(model, x_last: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """N(c) with the final norm's real scale at x^L_i (formula of issue 19)."""
    fam = family(model)
    norm = _get(model, NAMES[fam][3])
    if fam == "gpt2":
        sigma = torch.sqrt(((x_last - x_last.mean()) ** 2).mean() + norm.eps)
        return norm.weight * (c - c.mean(-1, keepdim=True)) / sigma
    rms = torch.sqrt((x_last**2).mean() + norm.variance_epsilon)
    return norm.weight * c / rms


def final_beta(model) -> torch.Tensor | None:
    return getattr(_get(model, NAMES[family(model)][3]), "bias", None)


def head_terms(model, p: Pass, i: int, u: torch.Tensor) -> np.ndarray:
    """heads[l, h, j] = α^{l,h}_ij ⟨N(f^{l,h}(x̂_j)), u⟩, f = (x̂ W^V_h + b^V_h) W^O_h (GQA: shared kv head)."""
    cfg = model.config
    H = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    KV = getattr(cfg, "num_key_value_heads", None) or H
    out = []
    for l in range(len(p.attn)):
        w_v, b_v, w_o, _ = value_out(model, l)
        d = w_o.shape[1]
        dh = w_o.shape[0] // H
        v = p.x_hat[l] @ w_v + (b_v if b_v is not None else 0)  # [n, KV·dh]
        rows = []
        for h in range(H):
            kv = h // (H // KV)
            f = v[:, kv * dh : (kv + 1) * dh] @ w_o[h * dh : (h + 1) * dh]  # [n, d]
            rows.append(p.attn[l][h, i] * (final_norm(model, p.final_in[i], f) @ u))
        out.append(torch.stack(rows))
        assert f.shape[1] == d
    return torch.stack(out).numpy()


# ---------------------------------------------------------------- sources: a plain propagation (issue 19's rules)
def _gauss(k: int = 48):
    t, w = np.polynomial.legendre.leggauss(k)
    return torch.tensor((t + 1) / 2), torch.tensor(w / 2)


def swiglu_factors(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """IG of silu(a)·b from zero along the straight path, by Gauss–Legendre quadrature (not the closed form):
    (∫₀¹ silu′(ta)·t b dt, ∫₀¹ silu(ta) dt), the factors of a part's a_k and b_k."""
    t, w = _gauss()
    ta = t[:, None] * a[None]
    sig = torch.sigmoid(ta)
    dsilu = sig * (1 + ta * (1 - sig))
    return (w[:, None] * dsilu * t[:, None]).sum(0) * b, (w[:, None] * ta * sig).sum(0)


def _ln(parts, weight, bias, eps, z, centre):
    """Norm of parts [m, d] whose sum is z: linear part with z's real scale; β to the bias part (last)."""
    if centre:
        parts = parts - parts.mean(-1, keepdim=True)
        s = torch.sqrt(((z - z.mean()) ** 2).mean() + eps)
    else:
        s = torch.sqrt((z**2).mean() + eps)
    out = parts * weight / s
    if bias is not None:
        out[-1] = out[-1] + bias
    return out


def _norm_args(mod):
    eps = getattr(mod, "eps", None) or mod.variance_epsilon
    return mod.weight, getattr(mod, "bias", None), eps


def _lin(mod, conv1d: bool):
    return (mod.weight if conv1d else mod.weight.T), mod.bias


@torch.no_grad()
def naive_sources(model, ids: list[int], i: int, u: torch.Tensor, b_u: float) -> tuple[torch.Tensor, float, list]:
    """(sources [n], bias, [Σ parts of each layer output]) by issue 19's rules, one token at a time.
    Llama/Qwen2/GPT-2 (pre-LN) and BERT with its MLM head (post-LN)."""
    mt = model.config.model_type
    ids_t = torch.tensor([ids])
    outs = (
        model(input_ids=ids_t, output_attentions=True, use_cache=False)
        if mt != "bert"
        else model(input_ids=ids_t, output_attentions=True)
    )
    attn = [a[0] for a in outs.attentions]
    x0 = []
    layers = model.bert.encoder.layer if mt == "bert" else (model.transformer.h if mt == "gpt2" else model.model.layers)
    h = layers[0].register_forward_pre_hook(
        lambda m, a, k: x0.append((k.get("hidden_states") if a == () else a[0])[0]), with_kwargs=True
    )
    model(input_ids=ids_t)
    h.remove()
    n, d = x0[0].shape
    m = n + 1
    P = torch.zeros(n, m, d, dtype=torch.float64)
    for k in range(n):
        P[k, k] = x0[0][k]
    sums = []
    cfg = model.config
    H = getattr(cfg, "num_attention_heads", None) or cfg.n_head
    KV = getattr(cfg, "num_key_value_heads", None) or H
    for l, layer in enumerate(layers):
        if mt == "gpt2":
            w_qkv, b_qkv = layer.attn.c_attn.weight, layer.attn.c_attn.bias
            w_v, b_v = w_qkv[:, 2 * d :], b_qkv[2 * d :]
            w_o, b_o = _lin(layer.attn.c_proj, True)
            n1, n2 = layer.ln_1, layer.ln_2
        elif mt == "bert":
            w_v, b_v = _lin(layer.attention.self.value, False)
            w_o, b_o = _lin(layer.attention.output.dense, False)
            n1, n2 = None, layer.attention.output.LayerNorm
        else:
            w_v, b_v = _lin(layer.self_attn.v_proj, False)
            w_o, b_o = _lin(layer.self_attn.o_proj, False)
            n1, n2 = layer.input_layernorm, layer.post_attention_layernorm
        centre = mt in ("gpt2", "bert")
        Ph = P if n1 is None else torch.stack([_ln(P[j], *_norm_args(n1), P[j].sum(0), centre) for j in range(n)])
        dh = w_o.shape[0] // H
        U = P.clone()
        for h_ in range(H):
            kv = h_ // (H // KV)
            V = Ph @ w_v[:, kv * dh : (kv + 1) * dh]  # [n, m, dh]
            A = torch.einsum("ij,jkd->ikd", attn[l][h_], V) @ w_o[h_ * dh : (h_ + 1) * dh]
            U = U + A
            if b_v is not None:
                U[:, -1] += b_v[kv * dh : (kv + 1) * dh] @ w_o[h_ * dh : (h_ + 1) * dh]
        if b_o is not None:
            U[:, -1] += b_o
        G = torch.stack([_ln(U[r], *_norm_args(n2), U[r].sum(0), centre) for r in range(n)])
        if mt in ("llama", "qwen2"):
            wg, bg = _lin(layer.mlp.gate_proj, False)
            wu, bu = _lin(layer.mlp.up_proj, False)
            wd, bd = _lin(layer.mlp.down_proj, False)
            a, bb = G @ wg, G @ wu
            if bg is not None:
                a[:, -1] += bg
            if bu is not None:
                bb[:, -1] += bu
            F = torch.zeros_like(G)
            for r in range(n):
                cg, cu = swiglu_factors(a[r].sum(0), bb[r].sum(0))
                F[r] = (a[r] * cg + bb[r] * cu) @ wd
            if bd is not None:
                F[:, -1] += bd
        else:
            if mt == "gpt2":
                (w1, b1), (w2, b2), act = _lin(layer.mlp.c_fc, True), _lin(layer.mlp.c_proj, True), layer.mlp.act
            else:
                (w1, b1), (w2, b2) = _lin(layer.intermediate.dense, False), _lin(layer.output.dense, False)
                act = layer.intermediate.intermediate_act_fn
            z = G @ w1
            z[:, -1] += b1
            tot = z.sum(1)
            F = (z * (act(tot) / tot)[:, None, :]) @ w2
            F[:, -1] += b2
        if mt == "bert":
            E = G + F
            P = torch.stack([_ln(E[r], *_norm_args(layer.output.LayerNorm), E[r].sum(0), True) for r in range(n)])
        else:
            P = U + F
        sums.append(P.sum(1))
    Pi = P[i]
    if mt == "bert":
        tr = model.cls.predictions.transform
        wt, bt = _lin(tr.dense, False)
        z = Pi @ wt
        z[-1] += bt
        tot = z.sum(0)
        g = z * (tr.transform_act_fn(tot) / tot)
        Pi = _ln(g, *_norm_args(tr.LayerNorm), g.sum(0), True)
    else:
        fn = model.transformer.ln_f if mt == "gpt2" else model.model.norm
        Pi = _ln(Pi, *_norm_args(fn), Pi.sum(0), mt == "gpt2")
    out = Pi @ u
    return out[:-1], float(out[-1]) + b_u, sums
