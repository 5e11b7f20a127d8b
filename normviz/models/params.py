"""Standardised views of one layer's weights, whatever the family stores them as.

Row-vector convention everywhere: ``y = x @ W + b`` with ``W`` of shape [in, out].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from .arch import ArchSpec, NormSpec


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
    """A norm's parameters as the maps read them: ``weight`` is the effective scale γ (Gemma: 1 + w; a norm
    without weight: ones), ``kind`` "layernorm" | "rmsnorm" | "identity" (no norm at this place: OLMo-2 has none
    in front of its sublayers; scale 1, linear part the identity)."""

    module: nn.Module
    kind: str  # "layernorm" | "rmsnorm" | "identity"
    weight: torch.Tensor
    bias: torch.Tensor | None
    eps: float

    def scale(self, z: torch.Tensor) -> torch.Tensor:
        """Per-token denominator s_i: sqrt(Var(z_i)+eps) for LayerNorm, sqrt(mean(z_i^2)+eps) for RMSNorm."""
        if self.kind == "identity":
            return torch.ones(z.shape[:-1], dtype=z.dtype, device=z.device)
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


def _norm_params(mod: nn.Module, kind: str, spec: NormSpec | None = None) -> NormParams:
    spec = spec or NormSpec()
    eps = getattr(mod, "eps", None)
    if eps is None:
        eps = getattr(mod, "variance_epsilon", None)
    if eps is None:
        eps = spec.eps
    w = getattr(mod, "weight", None)
    if w is None:
        shape = getattr(mod, "normalized_shape", None)
        ref = next(iter(mod.parameters()), None)
        w = torch.ones(
            int(shape[-1]) if shape else 1, dtype=ref.dtype if ref is not None else torch.get_default_dtype()
        )
    elif spec.offset:
        w = w + spec.offset
    return NormParams(module=mod, kind=kind, weight=w, bias=getattr(mod, "bias", None), eps=float(eps))


def identity_norm(d: int, like: torch.Tensor) -> NormParams:
    """No norm at this place (the maps' formulas then read the vector itself)."""
    return NormParams(
        module=nn.Identity(),
        kind="identity",
        weight=torch.ones(d, dtype=like.dtype, device=like.device),
        bias=None,
        eps=0.0,
    )


def _norm(layer: nn.Module, path: str | None, kind: str, spec: NormSpec | None = None) -> NormParams | None:
    return _norm_params(get_path(layer, path), kind, spec) if path else None


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
    # a norm on a sublayer's output before the residual add (Gemma 2/3, OLMo-2): its γ and any constant
    # multiplier are folded into w_o / w_out above; its real per-token scale is the decomposition's
    # (LayerDecomposition.attn_row_scale / ff_row_scale)
    attn_out_norm: NormParams | None = None
    ff_out_norm: NormParams | None = None
    parallel: bool = False  # the FF reads the layer input x (through norm_on_attn_residual), not x + Attn
    # a mixture of experts: every expert's units side by side in w_in / w_up / w_out (the shared expert last),
    # with the units of each; the recorded router gates scale each expert's factors (LayerDecomposition)
    expert_units: tuple[int, ...] | None = None

    def head_w_o(self) -> torch.Tensor:
        """W_O split per head: [H, head_dim, d]."""
        return self.w_o.reshape(self.n_heads, self.head_dim, -1)


def _upcast_norm(norm: NormParams | None, dtype: torch.dtype) -> NormParams | None:
    if norm is None:
        return None
    import copy

    mod = copy.deepcopy(norm.module).to(dtype)
    bias = getattr(mod, "bias", None)
    return NormParams(module=mod, kind=norm.kind, weight=norm.weight.to(dtype), bias=bias, eps=norm.eps)


def upcast_params(p: LayerParams, dtype: torch.dtype) -> LayerParams:
    """``p`` with every weight in ``dtype`` (copies; norm modules copied too, so that they run in it): a
    bfloat16/float16 model's layer seen in float32, for the maps."""
    import dataclasses

    def t(x):
        return None if x is None else x.to(dtype)

    return dataclasses.replace(
        p,
        w_v=t(p.w_v),
        b_v=t(p.b_v),
        w_o=t(p.w_o),
        b_o=t(p.b_o),
        w_in=t(p.w_in),
        b_in=t(p.b_in),
        w_up=t(p.w_up),
        b_up=t(p.b_up),
        w_out=t(p.w_out),
        b_out=t(p.b_out),
        norm_on_input=_upcast_norm(p.norm_on_input, dtype),
        norm_on_attn_residual=_upcast_norm(p.norm_on_attn_residual, dtype),
        norm_on_ff_residual=_upcast_norm(p.norm_on_ff_residual, dtype),
        attn_out_norm=_upcast_norm(p.attn_out_norm, dtype),
        ff_out_norm=_upcast_norm(p.ff_out_norm, dtype),
    )


def head_counts(config, spec: ArchSpec) -> tuple[int, int, int]:
    """(n_heads, n_kv_heads, head_dim) from the config fields the spec names."""
    f = spec.fields
    n_heads = f.get(config, f.heads)
    n_kv = spec.n_kv_heads or f.get(config, f.kv_heads, n_heads)
    head_dim = f.get(config, f.head_dim) or f.get(config, f.d_model) // n_heads
    return int(n_heads), int(n_kv), int(head_dim)


def sizes(config, spec: ArchSpec) -> tuple[int, int]:
    """(d_model, d_ff) from the config fields the spec names (d_ff defaults to 4·d, as GPT-2's n_inner)."""
    f = spec.fields
    d = int(f.get(config, f.d_model))
    return d, int(f.get(config, f.d_ff, 4 * d))


def _out_map(w: torch.Tensor, b: torch.Tensor | None, factor: float, norm: NormParams | None):
    """A sublayer's output projection as the residual stream receives it: × a constant multiplier, then the
    linear part of the norm that follows it (its γ, and centring for a LayerNorm), folded into the weights.
    Its bias is folded the same way; the norm's per-token scale is applied by the decomposition."""
    if factor != 1.0:
        w, b = w * factor, (b * factor if b is not None else None)
    if norm is not None:
        w = norm.linear_part(w)
        b = norm.linear_part(b) if b is not None else None
    return w, b


def layer_params(layer: nn.Module, spec: ArchSpec, config) -> LayerParams:
    n_heads, n_kv, head_dim = head_counts(config, spec)
    vmod = get_path(layer, spec.value)
    cols = spec.value_columns(n_heads, n_kv, head_dim)
    w_v = _weight(vmod, spec.conv1d)[:, cols]
    b_v = vmod.bias[cols] if vmod.bias is not None else None
    omod = get_path(layer, spec.out)
    expert_units = None
    if spec.moe is not None and _has(layer, spec.moe.experts):
        w_in, w_up, w_out, expert_units, act, (b_in, b_up) = _experts(layer, spec.moe, config)
        b_out = None
    else:
        fin = get_path(layer, spec.ff_in)
        fout = get_path(layer, spec.ff_out)
        fup = get_path(layer, spec.ff_up) if spec.ff_up else None
        w_in, b_in = _weight(fin, spec.conv1d), fin.bias
        w_up, b_up = (_weight(fup, spec.conv1d), fup.bias) if fup is not None else (None, None)
        w_out, b_out = _weight(fout, spec.conv1d), fout.bias
        act = get_path(layer, spec.act)
    if spec.ff_gate_up_fused:  # one module, output gate | up
        half = w_in.shape[1] // 2
        w_up, b_up = w_in[:, half:], (b_in[half:] if b_in is not None else None)
        w_in, b_in = w_in[:, :half], (b_in[:half] if b_in is not None else None)
    attn_out_norm = _norm(layer, spec.norm_after_attn_out, spec.norm_kind, spec.norm)
    ff_out_norm = _norm(layer, spec.norm_after_ff_out, spec.norm_kind, spec.norm)
    w_o, b_o = _out_map(
        _weight(omod, spec.conv1d),
        omod.bias,
        float(getattr(config, spec.attn_out_scale)) if spec.attn_out_scale else 1.0,
        attn_out_norm,
    )
    w_out, b_out = _out_map(
        w_out, b_out, float(getattr(config, spec.ff_out_scale)) if spec.ff_out_scale else 1.0, ff_out_norm
    )
    d = w_o.shape[1]
    n_in = _norm(layer, spec.norm_on_input, spec.norm_kind, spec.norm)
    n_attn = _norm(layer, spec.norm_on_attn_residual, spec.norm_kind, spec.norm)
    if spec.placement == "pre":  # no norm in front of a sublayer (OLMo-2): the identity there
        n_in = n_in or identity_norm(d, w_o)
        n_attn = n_attn or identity_norm(d, w_o)
    return LayerParams(
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        w_v=w_v,
        b_v=b_v,
        value_columns=cols,
        w_o=w_o,
        b_o=b_o,
        norm_on_input=n_in,
        norm_on_attn_residual=n_attn,
        norm_on_ff_residual=_norm(layer, spec.norm_on_ff_residual, spec.norm_kind, spec.norm),
        ff_kind=spec.ff_kind,
        w_in=w_in,
        b_in=b_in,
        w_up=w_up,
        b_up=b_up,
        w_out=w_out,
        b_out=b_out,
        act=act,
        attn_out_norm=attn_out_norm,
        ff_out_norm=ff_out_norm,
        parallel=spec.parallel,
        expert_units=expert_units,
    )


def _has(layer: nn.Module, path: str) -> bool:
    try:
        get_path(layer, path)
    except AttributeError:
        return False
    return True


def _experts(layer: nn.Module, moe, config=None):
    """(w_in, w_up [d, U], w_out [U, d], units per expert, activation) of a mixture of experts: each expert's gate
    and up rows of gate_up_proj and its down_proj side by side, the shared expert's after them."""
    ex = get_path(layer, moe.experts)
    if moe.interleaved:
        return _interleaved_experts(ex, moe, config)
    E, two_f, d = ex.gate_up_proj.shape
    F = two_f // 2
    gu = ex.gate_up_proj
    w_in = gu[:, :F].permute(2, 0, 1).reshape(d, E * F)
    w_up = gu[:, F:].permute(2, 0, 1).reshape(d, E * F)
    w_out = ex.down_proj.permute(0, 2, 1).reshape(E * F, d)
    units = [F] * E
    if moe.shared:
        sh = get_path(layer, moe.shared)
        w_in = torch.cat([w_in, sh.gate_proj.weight.T], 1)
        w_up = torch.cat([w_up, sh.up_proj.weight.T], 1)
        w_out = torch.cat([w_out, sh.down_proj.weight.T], 0)
        units.append(sh.gate_proj.weight.shape[0])
    return w_in, w_up, w_out, tuple(units), ex.act_fn, (None, None)


def _interleaved_experts(ex: nn.Module, moe, config):
    """GPT-OSS's experts as one wide gated FF (:func:`_experts`): gate_up_proj [E, d, 2F] with the gate in the even
    columns and the up in the odd ones, their biases (the up's offset added to its bias), and the activation a
    :class:`ClampedGLU`. Each expert's down bias, which the router's gate scales too, is one more unit of its
    expert whose gate and up are constants (weights 0, biases c and 1: value g(c)·1) and whose W_out row is
    b_down / g(c): so it rides the same frozen gate, and every expert's output, bias included, is its units'."""
    from ..core.activations import ClampedGLU

    act = ClampedGLU(float(getattr(config, moe.glu_alpha)), float(getattr(config, moe.glu_limit)), moe.up_offset)
    gu, gb = ex.gate_up_proj, ex.gate_up_proj_bias  # [E, d, 2F], [E, 2F]
    E, d, two_f = gu.shape
    F = two_f // 2
    c = min(1.0, act.limit / 2)
    g_c = float(act(torch.tensor([c], dtype=torch.float64))[0])
    zeros = torch.zeros(E, d, 1, dtype=gu.dtype, device=gu.device)
    w_in = torch.cat([gu[..., 0::2], zeros], 2).permute(1, 0, 2).reshape(d, E * (F + 1))
    w_up = torch.cat([gu[..., 1::2], zeros], 2).permute(1, 0, 2).reshape(d, E * (F + 1))
    ones = torch.ones(E, 1, dtype=gb.dtype, device=gb.device)
    b_in = torch.cat([gb[:, 0::2], c * ones], 1).reshape(-1)
    b_up = torch.cat([gb[:, 1::2] + moe.up_offset, ones], 1).reshape(-1)
    w_out = torch.cat([ex.down_proj, (ex.down_proj_bias / g_c)[:, None, :]], 1).reshape(E * (F + 1), d)
    return w_in, w_up, w_out, (F + 1,) * E, act, (b_in, b_up)
