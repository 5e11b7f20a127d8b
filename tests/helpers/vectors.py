"""The model's own vectors at each stage, captured with hooks, independent of normviz's decomposition."""

from __future__ import annotations

import torch

from normviz.models.params import get_path


def _hooks(store: dict):
    def out_hook(key):
        def fn(module, args, output):
            store[key] = (output[0] if isinstance(output, tuple) else output)[0].clone()

        return fn

    def in_hook(key):
        def fn(module, args, kwargs):
            store[key] = (kwargs.get("hidden_states") if "hidden_states" in kwargs else args[0])[0].clone()

        return fn

    return out_hook, in_hook


def hook_stack(layers, spec, store: dict, tag: str = "", with_ff: bool = True) -> list:
    """Hooks on one stack of layers: the model's own vectors at each stage, keys ((tag, i), name)."""
    out_hook, in_hook = _hooks(store)
    handles = []
    for i, layer in enumerate(layers):
        k = (tag, i)
        handles.append(layer.register_forward_pre_hook(in_hook((k, "x")), with_kwargs=True))
        handles.append(layer.register_forward_hook(out_hook((k, "layer_out"))))
        handles.append(get_path(layer, spec.out).register_forward_hook(out_hook((k, "attn_out"))))
        handles.append(get_path(layer, spec.value).register_forward_hook(out_hook((k, "value"))))
        ln = spec.norm_after_attn if spec.placement == "post" else spec.norm_before_ff  # on x + Attn(·)
        handles.append(get_path(layer, ln).register_forward_hook(out_hook((k, "ln_out"))))
        handles.append(get_path(layer, ln).register_forward_pre_hook(in_hook((k, "z")), with_kwargs=True))
        if with_ff:
            handles.append(get_path(layer, spec.ff_out).register_forward_hook(out_hook((k, "ff_out"))))
            if spec.placement == "post":
                handles.append(
                    get_path(layer, spec.norm_after_ff).register_forward_pre_hook(
                        in_hook((k, "z_ff")), with_kwargs=True
                    )
                )
    return handles


def stack_vectors(store: dict, n_layers: int, attentions, tag: str = "") -> list[dict[str, torch.Tensor]]:
    layers = []
    for i in range(n_layers):
        d = {name: v for (k, name), v in store.items() if isinstance(k, tuple) and k == (tag, i)}
        d["attn"] = attentions[i][0]
        layers.append(d)
    return layers


@torch.no_grad()
def model_vectors(lm, ids: list[int], token_type_ids: list[int] | None = None) -> list[dict[str, torch.Tensor]]:
    store: dict = {}
    handles = hook_stack(lm.layers, lm.spec, store)
    try:
        extra = {"token_type_ids": torch.tensor([token_type_ids], device=lm.device)} if token_type_ids else {}
        out = lm.model(input_ids=torch.tensor([ids], device=lm.device), output_attentions=True, **extra)
    finally:
        for h in handles:
            h.remove()
    return stack_vectors(store, lm.n_layers, out.attentions)


def independent_head_vectors(lm, layer_index: int, value_out: torch.Tensor) -> torch.Tensor:
    """f^h(x_j) from the model's own value projection output and its output-projection weight: [H, n, d]."""
    layer = lm.layers[layer_index]
    n_heads = lm.n_heads
    n = value_out.shape[0]
    omod = get_path(layer, lm.spec.out)
    w_o = omod.weight if lm.spec.conv1d else omod.weight.T  # [H*dh, d]
    head_dim = w_o.shape[0] // n_heads
    if lm.spec.qkv_layout == "fused_qkv":  # q | k | v
        value_out = value_out[:, 2 * n_heads * head_dim :]
    n_kv = value_out.shape[1] // head_dim
    v = value_out.reshape(n, n_kv, head_dim).transpose(0, 1)
    v = v.repeat_interleave(n_heads // n_kv, dim=0)
    return torch.stack([v[h] @ w_o[h * head_dim : (h + 1) * head_dim] for h in range(n_heads)])
