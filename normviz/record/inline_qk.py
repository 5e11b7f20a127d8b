"""q and k of a layer whose attention runs inline (``ArchSpec.attention_call == "inline"``: Falcon).

Such a layer makes no call through transformers' attention interface for :func:`normviz.record.attention_capture.rerun`
to stop at, so q and k are taken from its fused q | k | v projection (``ArchSpec.value``): the layer is run up to
that projection (its input norm and the projection itself, nothing after), its output [B, n, ·] is split by the
row's layout (:meth:`normviz.models.arch.ArchSpec.qk_columns`) into q [B, H, n, dh] and k [B, KV, n, dh], and the
row's position encoding is applied (``ArchSpec.rotary``):

    "rope":  q ↦ q ⊙ cos + rotate_half(q) ⊙ sin   over the first r features (r = the width of cos), k alike,

with the cos, sin the layer is called with (its ``position_embeddings``), the operations of the model's own
``apply_rotary_pos_emb``. The score is then c·⟨q_i, k_j⟩ with the module's scaling (1/√dh, as the interface's).
"""

from __future__ import annotations

import torch

from ..models.params import get_path
from .attention_capture import AttentionInputs


class _Stop(Exception):
    """Raised once the fused projection's output is captured (nothing after it runs)."""


def _not_an_interface_function(*args, **kwargs):
    raise RuntimeError("an inline attention has no attention function to recompute α with")


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE of x [B, heads, n, dh] with cos, sin [B|1, n, r] over x's first r features."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    r = cos.shape[-1]
    rot, rest = x[..., :r], x[..., r:]
    half = r // 2
    rot = (rot * cos) + (torch.cat((-rot[..., half:], rot[..., :half]), dim=-1) * sin)
    return rot if rest.shape[-1] == 0 else torch.cat((rot, rest), dim=-1)


def rerun(layer: torch.nn.Module, x: torch.Tensor, call: tuple[tuple, dict], spec, p) -> AttentionInputs:
    """q, k (and v) of ``layer`` called on ``x`` [n, d] or a batch [B, n, d] with its recorded ``call``; ``p`` the
    layer's :class:`normviz.models.params.LayerParams` (n_heads, n_kv_heads, head_dim)."""
    args, kwargs = call
    fused = get_path(layer, spec.value)
    got: list[torch.Tensor] = []

    def stop(module, inputs, output):
        got.append(output)
        raise _Stop

    handle = fused.register_forward_hook(stop)
    try:
        with torch.no_grad():
            layer(x if x.dim() == 3 else x.unsqueeze(0), *args, **kwargs)
    except _Stop:
        pass
    finally:
        handle.remove()
    if not got:
        raise RuntimeError(f"the layer never called its fused projection {spec.value!r}")
    out = got[0]
    H, KV, dh = p.n_heads, p.n_kv_heads, p.head_dim
    q_cols, k_cols = (c.to(out.device) for c in spec.qk_columns(H, KV, dh))
    B, n = out.shape[:2]
    q = out[..., q_cols].view(B, n, H, dh).transpose(1, 2)
    k = out[..., k_cols].view(B, n, KV, dh).transpose(1, 2)
    if spec.rotary == "rope":
        cos, sin = kwargs["position_embeddings"]
        q, k = rope(q, cos, sin), rope(k, cos, sin)
    elif spec.rotary is not None:
        raise ValueError(f"ArchSpec({spec.family}): unknown rotary {spec.rotary!r}")
    value = out[..., spec.value_columns(H, KV, dh)].view(B, n, KV, dh).transpose(1, 2)
    module = get_path(layer, spec.attn) if spec.attn else fused
    return AttentionInputs(_not_an_interface_function, module, q, k, value, None)


__all__ = ["rerun", "rope"]
