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
        hooks.append(layer.register_forward_pre_hook(
            lambda m, a, k: rec["x_in"].append((k.get("hidden_states") if a == () else a[0])[0]), with_kwargs=True))
        hooks.append(getattr(layer, norm1).register_forward_hook(lambda m, a, o: rec["x_hat"].append(o[0])))
        hooks.append(getattr(layer, ffp).register_forward_hook(lambda m, a, o: rec["ff"].append(o[0])))
        hooks.append(layer.register_forward_hook(
            lambda m, a, o: rec["out"].append((o[0] if isinstance(o, tuple) else o)[0])))
    hooks.append(_get(model, final).register_forward_pre_hook(lambda m, a: rec.__setitem__("final", a[0][0])))
    try:
        out = model(input_ids=torch.tensor([ids]), output_attentions=True, use_cache=False)
    finally:
        for h in hooks:
            h.remove()
    return Pass(logits=out.logits[0], attn=[a[0] for a in out.attentions], x_in=rec["x_in"], x_hat=rec["x_hat"],
                ff_out=rec["ff"], out=rec["out"], final_in=rec["final"])


def value_out(model, layer_index: int):
    """(W_V [d, KV·dh], b_V, W_O [H·dh, d], b_O) as row-vector matrices, from the raw modules."""
    fam = family(model)
    layer = _get(model, NAMES[fam][0])[layer_index]
    if fam == "gpt2":
        d = model.config.n_embd
        w, b = layer.attn.c_attn.weight, layer.attn.c_attn.bias  # Conv1D [in, out]: q | k | v
        return w[:, 2 * d:], b[2 * d:], layer.attn.c_proj.weight, layer.attn.c_proj.bias
    a = layer.self_attn
    return a.v_proj.weight.T, a.v_proj.bias, a.o_proj.weight.T, a.o_proj.bias


def final_norm(model, x_last: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """N(c) with the final norm's real scale at x^L_i (formula of issue 19)."""
    fam = family(model)
    norm = _get(model, NAMES[fam][3])
    if fam == "gpt2":
        sigma = torch.sqrt(((x_last - x_last.mean()) ** 2).mean() + norm.eps)
        return norm.weight * (c - c.mean(-1, keepdim=True)) / sigma
    rms = torch.sqrt((x_last ** 2).mean() + norm.variance_epsilon)
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
            f = v[:, kv * dh:(kv + 1) * dh] @ w_o[h * dh:(h + 1) * dh]  # [n, d]
            rows.append(p.attn[l][h, i] * (final_norm(model, p.final_in[i], f) @ u))
        out.append(torch.stack(rows))
        assert f.shape[1] == d
    return torch.stack(out).numpy()
