"""‖f^h(x_j)‖: the length of each token's transformed vector, per layer and head.

f^h(x_j) = (x̂_j W^V_h + b^V_h) W^O_h (x̂ = x post-LN, the first norm's output pre-LN). Since
α ≥ 0, the 2020 map factorises: ‖α^h_ij f^h(x_j)‖ = α^h_ij ‖f^h(x_j)‖, which is why a strip of these
lengths next to a weight map explains the norm map.
"""

from __future__ import annotations

import numpy as np
import torch

from .errors import NormvizError


def transformed_norms(session, layer: int | None = None, head: int | None = None) -> np.ndarray:
    """‖f^h(x_j)‖ from a Session's records: [L, H, n]; ``layer`` given: [H, n]; ``head`` too: [n].

    Computed from the recorded value vectors and the layer's W^O (no forward pass if the session has
    already recorded); the per-pair tensors are not built."""
    views = session.layers()
    L = len(views)
    if layer is not None and not -L <= layer < L:
        raise NormvizError(f"layer {layer} is out of range: this model has {L} layers (0…{L - 1}).")
    out = []
    for view in [views[layer]] if layer is not None else views:
        f = view.__dict__.get("head_vectors")
        if f is None:  # not cached by a map family: compute without keeping it
            f = torch.bmm(view.head_values, view.p.head_w_o())
        out.append(torch.linalg.vector_norm(f.to(torch.float64), dim=-1).cpu().numpy())
    arr = np.stack(out)  # [L', H, n]
    if layer is not None:
        arr = arr[0]
        if head is not None:
            H = arr.shape[0]
            if not -H <= head < H:
                raise NormvizError(f"head {head} is out of range: this model has {H} heads (0…{H - 1}).")
            arr = arr[head]
    elif head is not None:
        arr = arr[:, head]
    return arr


def attention_row_scale(session, layer: int) -> np.ndarray | None:
    """1/s_i [n] of the norm on the attention output before the residual add (Gemma 2/3, OLMo-2), per receiving
    token i: there ‖α^h_ij f^h(x_j)‖ (the norm map) = α^h_ij ‖f^h(x_j)‖ / s_i (docs/maps.md), P's γ folded into
    W^O. None where no norm follows the attention (the map is α ‖f‖ itself)."""
    views = session.layers()
    if not -len(views) <= layer < len(views):
        raise NormvizError(f"layer {layer} is out of range: this model has {len(views)} layers (0…{len(views) - 1}).")
    scale = views[layer].attn_row_scale
    return None if scale is None else scale.to(torch.float64).cpu().numpy()


def norms_from_maps(attention: np.ndarray, norm: np.ndarray) -> np.ndarray:
    """‖f(x_j)‖ from an Analysis's ``attention`` and ``norm`` arrays (same shape [..., n, n]) → [..., n]:
    norm_ij / α_ij in the row i where α_ij is largest (α > 0 there: softmax weights of a visible token)."""
    a = np.asarray(attention, dtype=np.float64)
    m = np.asarray(norm, dtype=np.float64)
    if a.shape != m.shape:
        raise NormvizError(f"attention {a.shape} and norm {m.shape} differ in shape.")
    i = np.argmax(a, axis=-2)[..., None, :]  # [..., 1, n]
    top = np.take_along_axis(a, i, axis=-2)[..., 0, :]
    val = np.take_along_axis(m, i, axis=-2)[..., 0, :]
    return np.divide(val, top, out=np.zeros_like(val), where=top > 0)
