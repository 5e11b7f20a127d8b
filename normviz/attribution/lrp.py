"""An LRP-family relevance: gradient × input through the network with every norm's scale and every attention
pattern frozen at the real pass (CP-LRP, Ali et al. 2022, "XAI for Transformers: Better Explanations through
Conservative Propagation"; AttnLRP, Achtibat et al. 2024, keeps the norms' rule and adds its own for the softmax).

    cp_lrp(session, token, foil, position)   a :class:`Relevance`: ``tokens`` [n] (⟨e_j, ∂F/∂e_j⟩ on each token's
                                              input embedding), ``heads`` [L, H] (⟨o_lh, ∂F/∂o_lh⟩ on each head's
                                              output before W^O, all positions), ``gap`` = F − Σ tokens

"Frozen": a norm's output is β + (N(x) − β)·r(x)/r(x)|_detached with r its own scale (the RMS, or the standard
deviation for LayerNorm, with its ε): the same value, and the gradient of the norm with its scale held constant
(the "LN treated as linear" rule); each head's output is out|_detached + A|_detached·(V − V|_detached) (the same
value; gradient through the values only). One forward and one backward pass. What is left non-linear is the FF
block: its gradient × input is not its output, so the relevance does not sum to the score; ``gap`` says by how
much (with the FF removed the network is linear in the embeddings and the gap is 0 — the test).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ..core.errors import NormvizError
from ..record import attention_interface
from . import intervene
from .knockout import InterventionTarget

_STATE = threading.local()


@dataclass
class Relevance:
    tokens: np.ndarray  # [n]
    heads: np.ndarray  # [L, H]
    total: float
    gap: float  # total − Σ tokens
    token: int
    foil: int | None
    position: int
    name: str = "CP-LRP (gradient × input, norms and attention frozen)"
    biases: float = float("nan")  # AttnLRP: relevance absorbed by biases (and the readout's own)
    softmax: float = float("nan")  # AttnLRP: relevance absorbed by the softmax linearisations

    @classmethod
    def of(cls, t, tokens: np.ndarray, heads: np.ndarray, **extra) -> Relevance:
        """The relevance of target ``t`` (an InterventionTarget): its total, token, foil and position, and the gap
        total − Σ tokens."""
        return cls(
            tokens=tokens,
            heads=heads,
            total=t.total,
            gap=float(t.total - tokens.sum()),
            token=t.token,
            foil=t.foil,
            position=t.i,
            **extra,
        )


def _frozen_attention(fn, keep, module, query, key, value, attention_mask, *args, **kwargs):
    layer = keep["layer_of"].get(id(module))
    out, weights = fn(module, query, key, value, attention_mask, *args, **kwargs)
    if layer is None:
        return out, weights
    v = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)  # grouped K/V per query head
    moving = torch.matmul(weights.detach().to(v.dtype), v - v.detach()).transpose(1, 2)  # [B, n, H, d_head]
    out = out.detach() + moving.to(out.dtype)
    return out * keep[layer].to(out.dtype)[:, None, :, None], weights


def _choose(fn):
    keep = getattr(_STATE, "keep", None)
    return fn if keep is None else functools.partial(_frozen_attention, fn, keep)


def _is_norm(module) -> bool:
    name = type(module).__name__
    return name.endswith("Norm") or "LayerNorm" in name or "RMSNorm" in name


def _freeze_norm(module, args, output):
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or not isinstance(output, torch.Tensor) or x.shape != output.shape:
        return output
    eps = float(getattr(module, "variance_epsilon", getattr(module, "eps", 0.0)) or 0.0)
    x64 = x.to(torch.float64)
    layer = "LayerNorm" in type(module).__name__ and "RMS" not in type(module).__name__
    if layer:
        r = (x64.var(-1, unbiased=False, keepdim=True) + eps).sqrt()
    else:
        r = (x64.pow(2).mean(-1, keepdim=True) + eps).sqrt()
    bias = getattr(module, "bias", None)
    beta = bias.to(output.dtype) if isinstance(bias, torch.Tensor) else 0.0
    ratio = (r / r.detach()).to(output.dtype)
    return beta + (output - beta) * ratio


def logit_target(session, token, foil, position: int, target: InterventionTarget | None, method: str):
    """(the intervention target, a gate of ones [1, H] per layer whose gradient × 1 is each head's relevance, and
    ``"layer_of"``: attention module id → layer) — the start of an LRP-family pass; refused without an LM head."""
    t: Any = target or InterventionTarget(session, token, foil, position)
    if t.readout is None:
        raise NormvizError(f"{method} explains a logit: this model has no LM head.")
    lm = t.lm
    gates: dict[Any, Any] = {
        l: torch.ones((1, lm.n_heads), dtype=torch.float64, device=lm.device, requires_grad=True)
        for l in range(lm.n_layers)
    }
    gates["layer_of"] = intervene.layer_index(lm)
    return t, gates


def cp_lrp(session, token=None, foil=None, position: int = -1, target: InterventionTarget | None = None) -> Relevance:
    t, keep = logit_target(session, token, foil, position, target, "CP-LRP")
    lm = t.lm
    L = lm.n_layers
    if not attention_interface.add(_choose):  # pragma: no cover - transformers < 5
        raise RuntimeError("this transformers has no attention-function interface (needs transformers >= 5)")
    handles = [m.register_forward_hook(_freeze_norm) for m in lm.model.modules() if _is_norm(m)]
    kwargs = intervene.model_inputs(lm, t.encoded, 1)
    ids = kwargs.pop("input_ids")
    try:
        with torch.enable_grad(), attention_interface.thread_state(_STATE, "keep", keep):
            emb = lm.model.get_input_embeddings()(ids).detach().requires_grad_(True)
            states = lm.model(inputs_embeds=emb, **kwargs).last_hidden_state[:, t.i]
            f = intervene.scores(t.readout, states, t.token, t.foil)
            f.sum().backward()
    finally:
        for h in handles:
            h.remove()
    if emb.grad is None:  # pragma: no cover
        raise RuntimeError("no gradient reached the embeddings")
    tokens = (emb.detach().to(torch.float64) * emb.grad.to(torch.float64)).sum(-1)[0].cpu().numpy()
    heads = np.stack([keep[l].grad[0].cpu().numpy() for l in range(L)])
    return Relevance.of(t, tokens, heads)
