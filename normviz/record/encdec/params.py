"""The decoder's view of an encoder–decoder :class:`~normviz.models.loading.LoadedModel`, and the weights of
its cross-attention blocks.

The loaded object is the encoder's view (``lm.layers``, ``lm.spec``, ``lm.layer_params`` are the encoder's),
so every per-layer map family runs on the encoder unchanged; :func:`decoder_view` is the same model seen
through the decoder's self-attention spec, for the same families on the decoder's self-attention.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ...core.errors import UnsupportedModelError
from ...models.params import _weight, get_path, head_counts


def require_seq2seq(lm) -> None:
    if not getattr(lm, "is_encoder_decoder", False):
        raise UnsupportedModelError(
            f"{lm.name!r} is not an encoder–decoder model; a target text (and the "
            "cross-attention maps) need one, e.g. Marian, BART, T5 or 'toy-mt'."
        )


def decoder_view(lm):
    """The decoder stack as a LoadedModel: spec = the decoder's self-attention sub-block, layers = decoder
    layers (cached on ``lm``)."""
    require_seq2seq(lm)
    view = lm._views.get("decoder")
    if view is None:
        view = dataclasses.replace(lm, spec=lm.spec.decoder, stack="decoder", _params=[], _views={})
        lm._views["decoder"] = view
    return view


@dataclass
class CrossParams:
    """One cross-attention block: f^h(e_j) = (e_j W^V_h + b^V_h) W^O_h, and b^O."""

    n_heads: int
    head_dim: int
    w_v: torch.Tensor  # [d, H*dh]
    b_v: torch.Tensor | None
    w_o: torch.Tensor  # [H*dh, d]
    b_o: torch.Tensor | None

    def head_w_o(self) -> torch.Tensor:
        return self.w_o.reshape(self.n_heads, self.head_dim, -1)


def cross_params(lm, index: int) -> CrossParams:
    """The cross block of decoder layer ``index`` (cached on ``lm``)."""
    cache = lm._views.setdefault("cross", {})
    if index not in cache:
        dec = decoder_view(lm)
        layer = dec.layers[index]
        spec = lm.spec.cross
        n_heads, _, head_dim = head_counts(lm.config, dec.spec)
        vmod, omod = get_path(layer, spec.value), get_path(layer, spec.out)
        cache[index] = CrossParams(
            n_heads=n_heads,
            head_dim=head_dim,
            w_v=_weight(vmod, False),
            b_v=vmod.bias,
            w_o=_weight(omod, False),
            b_o=omod.bias,
        )
    return cache[index]
