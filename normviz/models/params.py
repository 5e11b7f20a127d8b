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


def _norm(layer: nn.Module, path: str | None, kind: str) -> NormParams | None:
    return _norm_params(get_path(layer, path), kind) if path else None


@dataclass
class LayerParams:
    """What the decomposition needs from one layer."""

    n_heads: int
    n_kv_heads: int
    head_dim: int
    w_v: torch.Tensor  # [d, n_kv*head_dim]
    b_v: torch.Tensor | None
    value_columns: slice  # where v sits in the value module's output (ArchSpec.value_columns)
    w_o: torch.Tensor  # [n_heads*head_dim, d]
    b_o: torch.Tensor | None
    norm_on_input: NormParams | None  # pre-LN: the norm before attention
    norm_on_attn_residual: NormParams  # post-LN: norm_after_attn; pre-LN: norm_before_ff
    norm_on_ff_residual: NormParams | None  # post-LN: norm_after_ff
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


def _upcast_norm(norm: NormParams | None, dtype: torch.dtype) -> NormParams | None:
    if norm is None:
        return None
    import copy

    mod = copy.deepcopy(norm.module).to(dtype)
    return NormParams(module=mod, kind=norm.kind, weight=mod.weight, bias=getattr(mod, "bias", None), eps=norm.eps)


def upcast_params(p: LayerParams, dtype: torch.dtype) -> LayerParams:
    """``p`` with every weight in ``dtype`` (copies; norm modules copied too, so that they run in it): a
    bfloat16/float16 model's layer seen in float32, for the maps."""
    import dataclasses

    def t(x):
        return None if x is None else x.to(dtype)
    return dataclasses.replace(
        p, w_v=t(p.w_v), b_v=t(p.b_v), w_o=t(p.w_o), b_o=t(p.b_o), w_in=t(p.w_in), b_in=t(p.b_in),
        w_up=t(p.w_up), b_up=t(p.b_up), w_out=t(p.w_out), b_out=t(p.b_out),
        norm_on_input=_upcast_norm(p.norm_on_input, dtype),
        norm_on_attn_residual=_upcast_norm(p.norm_on_attn_residual, dtype),
        norm_on_ff_residual=_upcast_norm(p.norm_on_ff_residual, dtype))


def head_counts(config, spec: ArchSpec) -> tuple[int, int, int]:
    """(n_heads, n_kv_heads, head_dim) from the config fields the spec names."""
    f = spec.fields
    n_heads = f.get(config, f.heads)
    n_kv = f.get(config, f.kv_heads, n_heads)
    head_dim = f.get(config, f.head_dim) or f.get(config, f.d_model) // n_heads
    return int(n_heads), int(n_kv), int(head_dim)


def sizes(config, spec: ArchSpec) -> tuple[int, int]:
    """(d_model, d_ff) from the config fields the spec names (d_ff defaults to 4·d, as GPT-2's n_inner)."""
    f = spec.fields
    d = int(f.get(config, f.d_model))
    return d, int(f.get(config, f.d_ff, 4 * d))


def layer_params(layer: nn.Module, spec: ArchSpec, config) -> LayerParams:
    n_heads, n_kv, head_dim = head_counts(config, spec)
    vmod = get_path(layer, spec.value)
    cols = spec.value_columns(n_heads, n_kv, head_dim)
    w_v = _weight(vmod, spec.conv1d)[:, cols]
    b_v = vmod.bias[cols] if vmod.bias is not None else None
    omod = get_path(layer, spec.out)
    fin = get_path(layer, spec.ff_in)
    fout = get_path(layer, spec.ff_out)
    fup = get_path(layer, spec.ff_up) if spec.ff_up else None
    return LayerParams(
        n_heads=n_heads, n_kv_heads=n_kv, head_dim=head_dim,
        w_v=w_v, b_v=b_v, value_columns=cols, w_o=_weight(omod, spec.conv1d), b_o=omod.bias,
        norm_on_input=_norm(layer, spec.norm_on_input, spec.norm_kind),
        norm_on_attn_residual=_norm(layer, spec.norm_on_attn_residual, spec.norm_kind),
        norm_on_ff_residual=_norm(layer, spec.norm_on_ff_residual, spec.norm_kind),
        ff_kind=spec.ff_kind,
        w_in=_weight(fin, spec.conv1d), b_in=fin.bias,
        w_up=_weight(fup, spec.conv1d) if fup is not None else None,
        b_up=fup.bias if fup is not None else None,
        w_out=_weight(fout, spec.conv1d), b_out=fout.bias,
        act=get_path(layer, spec.act),
    )
