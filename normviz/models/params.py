"""Standardised views of one layer's weights, whatever the family stores them as.

Row-vector convention everywhere: ``y = x @ W + b`` with ``W`` of shape [in, out].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from .arch import ArchSpec


def get_path(root: nn.Module, path: str) -> nn.Module:
    mod = root
    for part in path.split("."):
        mod = mod[int(part)] if part.isdigit() else getattr(mod, part)
    return mod


def _weight(mod: nn.Module, conv1d: bool) -> torch.Tensor:
    """Weight as [in, out] (nn.Linear stores [out, in]; GPT-2's Conv1D stores [in, out])."""
    return mod.weight if conv1d else mod.weight.T


@dataclass
class NormParams:
    module: nn.Module
    kind: str  # "layernorm" | "rmsnorm"
    weight: torch.Tensor
    bias: torch.Tensor | None
    eps: float

    def scale(self, z: torch.Tensor) -> torch.Tensor:
        """Per-token denominator s_i: sqrt(Var(z_i)+eps) for LayerNorm, sqrt(mean(z_i^2)+eps) for RMSNorm."""
        if self.kind == "layernorm":
            z = z - z.mean(-1, keepdim=True)  # the population variance, as LayerNorm takes it (torch.var is slower)
        return torch.sqrt(z.pow(2).mean(-1) + self.eps)

    def linear_part(self, u: torch.Tensor) -> torch.Tensor:
        """The linear map applied before dividing by s_i: γ⊙(u − mean(u)) (LayerNorm) or γ⊙u (RMSNorm)."""
        if self.kind == "layernorm":
            u = u - u.mean(-1, keepdim=True)
        return u * self.weight

    def apply(self, z: torch.Tensor) -> torch.Tensor:
        """The norm's output in full working precision: linear_part(z)/s + β.

        Computed from the formula rather than by the module, because some modules (Llama's RMSNorm)
        compute in float32 even inside a float64 model.
        """
        out = self.linear_part(z) / self.scale(z)[..., None]
        return out + self.bias if self.bias is not None else out


def _norm_params(mod: nn.Module, kind: str) -> NormParams:
    eps = getattr(mod, "eps", None)
    if eps is None:
        eps = getattr(mod, "variance_epsilon")
    return NormParams(module=mod, kind=kind, weight=mod.weight, bias=getattr(mod, "bias", None), eps=float(eps))


@dataclass
class LayerParams:
    """What the decomposition needs from one layer."""

    n_heads: int
    n_kv_heads: int
    head_dim: int
    w_v: torch.Tensor  # [d, n_kv*head_dim]
    b_v: torch.Tensor | None
    w_o: torch.Tensor  # [n_heads*head_dim, d]
    b_o: torch.Tensor | None
    norm1: NormParams
    norm2: NormParams
    ff_kind: str
    w_in: torch.Tensor  # mlp: [d, d_ff]; gated: gate [d, d_ff]
    b_in: torch.Tensor | None
    w_up: torch.Tensor | None  # gated only
    b_up: torch.Tensor | None
    w_out: torch.Tensor  # [d_ff, d]
    b_out: torch.Tensor | None
    act: Callable[[torch.Tensor], torch.Tensor]

    def head_w_o(self) -> torch.Tensor:
        """W_O split per head: [H, head_dim, d]."""
        return self.w_o.reshape(self.n_heads, self.head_dim, -1)


def head_counts(config) -> tuple[int, int, int]:
    """(n_heads, n_kv_heads, head_dim) from a config of any supported family."""
    n_heads = getattr(config, "num_attention_heads", None) or getattr(config, "n_head", None) or config.n_heads
    n_kv = getattr(config, "num_key_value_heads", None) or n_heads
    hidden = getattr(config, "hidden_size", None) or getattr(config, "n_embd", None) or config.dim
    head_dim = getattr(config, "head_dim", None) or hidden // n_heads
    return int(n_heads), int(n_kv), int(head_dim)


def layer_params(layer: nn.Module, spec: ArchSpec, config) -> LayerParams:
    n_heads, n_kv, head_dim = head_counts(config)
    vmod = get_path(layer, spec.value)
    w_v = _weight(vmod, spec.conv1d)
    b_v = vmod.bias
    if spec.fused_qkv:  # GPT-2 c_attn: [d, 3d] = q | k | v
        width = n_heads * head_dim
        w_v = w_v[:, 2 * width:3 * width]
        b_v = b_v[2 * width:3 * width] if b_v is not None else None
    omod = get_path(layer, spec.out)
    fin = get_path(layer, spec.ff_in)
    fout = get_path(layer, spec.ff_out)
    fup = get_path(layer, spec.ff_up) if spec.ff_up else None
    return LayerParams(
        n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
        w_v=w_v, b_v=b_v, w_o=_weight(omod, spec.conv1d), b_o=omod.bias,
        norm1=_norm_params(get_path(layer, spec.norm1), spec.norm_kind),
        norm2=_norm_params(get_path(layer, spec.norm2), spec.norm_kind),
        ff_kind=spec.ff_kind,
        w_in=_weight(fin, spec.conv1d), b_in=fin.bias,
        w_up=_weight(fup, spec.conv1d) if fup is not None else None,
        b_up=fup.bias if fup is not None else None,
        w_out=_weight(fout, spec.conv1d), b_out=fout.bias,
        act=get_path(layer, spec.act),
    )
