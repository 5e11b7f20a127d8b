"""AttnLRP (Achtibat et al. 2024, "AttnLRP: Attention-Aware Layer-Wise Relevance Propagation for Transformers",
ICML 2024): layer-wise relevance through every part of the model, the softmax included, by the Gradient × Input
trick — the model's own forward pass with each operation's backward replaced by its LRP rule, one backward pass,
relevance R = x ⊙ ∂F/∂x on any tensor x.

    attn_lrp(session, token, foil, position)   a :class:`~normviz.attribution.lrp.Relevance` (``tokens`` [n],
                                               ``heads`` [L, H], ``gap`` = F − Σ tokens) with the relevance the
                                               biases absorb (``biases``) and the softmax linearisations
                                               (``softmax``): Σ tokens + biases + softmax = F
    softmax_rule(z, R)                         the paper's softmax rule z ⊙ (R − s Σ R), s = softmax(z)

The rules (the paper's §3; in Gradient × Input form each is a change of the gradient only, the forward value is
the model's own):

    softmax             R_in = z ⊙ (R_out − s Σ R_out) (Prop. 3.1, the Taylor linearisation at z with its bias
                        left out): in Gradient × Input form the softmax's own gradient. Not conservative: the
                        bias of the linearisation, Σ R_out − Σ R_in, is what ``softmax`` adds up
    q·kᵀ and A·V        the uniform rule (bilinear: half the relevance to each factor): the gradient reaching
                        the query and key is divided by 4 (half at A·V, half again at q·kᵀ), the value's by 2
    norms               the identity/ε rule: LayerNorm and RMSNorm linear with their scale frozen (as CP-LRP)
    SiLU, GELU …        the identity rule R_in = R_out: the gradient through y = f(x) becomes y / x
    gate ⊙ up           the uniform rule: the gradient into a gated FF block's down projection is halved
    linear maps         the ε rule with ε → 0, i.e. the gradient; a bias b absorbs ⟨b, ∂F/∂b⟩

Where ours differs from the authors' code (lxt): no ε stabiliser in the identity rule (y / x is 0 at x = 0,
where y = 0 for SiLU and GELU); the relevance absorbed by biases and by each softmax is computed and returned,
so conservation is checked rather than assumed; the heads' relevance ⟨o_lh, ∂F/∂o_lh⟩ on each head's output
before W^O is read the same way as CP-LRP's.
"""

from __future__ import annotations

import functools
import threading

import numpy as np
import torch

from ..core.errors import NotApplicableError
from ..record import attention_interface
from . import intervene
from .knockout import InterventionTarget
from .lrp import Relevance, _freeze_norm, _is_norm, logit_target

_STATE = threading.local()
NAME = "AttnLRP (softmax linearised, uniform rule on q·k and A·V, identity rule on norms and activations)"
_NOT_ACTIVATIONS = ("Softmax", "Softmin", "LogSoftmax", "MultiheadAttention")


def softmax_rule(z: torch.Tensor, relevance: torch.Tensor, s: torch.Tensor | None = None, dim: int = -1):
    """AttnLRP's softmax rule (Prop. 3.1): the relevance ``relevance`` on s = softmax(z) sent to its input,
    z ⊙ (R − s Σ R) (sum over ``dim``). ``s``: the softmax when known (then z may be any per-row shift of the
    logits, e.g. log s: the rule's total does not change by a row constant since Σ s (R/s − Σ R) ... sums to 0)."""
    s = torch.softmax(z, dim) if s is None else s
    return z * (relevance - s * relevance.sum(dim, keepdim=True))


def _scale_grad(x: torch.Tensor, c: float) -> torch.Tensor:
    """x in value, c · ∂/∂x in the backward pass."""
    return x.detach() + c * (x - x.detach())


def _absorbed(weights: torch.Tensor, grad_a: torch.Tensor) -> float:
    """Σ R_out − Σ R_in over one attention's softmaxes, R_out = ½ A ⊙ ∂F/∂A (the softmax's half of A·V); the
    logits are taken as log A (a per-row shift of them, which the rule's total does not see; 0 where A = 0)."""
    a = weights.to(torch.float64)
    r = 0.5 * a * grad_a.to(torch.float64)
    z = torch.where(a > 0, a.clamp_min(torch.finfo(torch.float64).tiny).log(), torch.zeros_like(a))
    return float(r.sum() - softmax_rule(z, r, s=a).sum())


def _attention(fn, state, module, query, key, value, attention_mask, *args, **kwargs):
    layer = state["layer_of"].get(id(module))
    if layer is None:
        return fn(module, query, key, value, attention_mask, *args, **kwargs)
    if "dropout" in kwargs:
        kwargs["dropout"] = 0.0
    q, k, v = _scale_grad(query, 0.25), _scale_grad(key, 0.25), _scale_grad(value, 0.5)
    out, weights = fn(module, q, k, v, attention_mask, *args, **kwargs)
    if weights is not None and out.requires_grad:
        vv = value.detach().repeat_interleave(query.shape[1] // value.shape[1], dim=1)  # grouped K/V per head
        seen, w = state["softmax"], weights.detach()

        def absorb(g):
            grad_a = torch.matmul(g.transpose(1, 2).to(vv.dtype), vv.transpose(-1, -2))  # ∂F/∂A = ∂F/∂out · Vᵀ
            seen.append(_absorbed(w, grad_a))

        out.register_hook(absorb)
    else:
        state["unseen"] = True
    return out * state[layer].to(out.dtype)[:, None, :, None], weights


def _choose(fn):
    state = getattr(_STATE, "state", None)
    return fn if state is None else functools.partial(_attention, fn, state)


def _is_activation(module) -> bool:
    kind = type(module)
    return (
        kind.__module__ in ("transformers.activations", "torch.nn.modules.activation")
        and kind.__name__ not in _NOT_ACTIVATIONS
        and next(module.children(), None) is None
    )


def _identity_rule(seen: set, layer: int | None, module, args, output):
    """y = f(x) elementwise: the same y, with ∂y/∂x replaced by y / x (so x ⊙ ∂F/∂x = y ⊙ ∂F/∂y)."""
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or not isinstance(output, torch.Tensor) or x.shape != output.shape:
        return output
    seen.add(layer)
    y = output.detach()
    ratio = torch.where(x.detach() != 0, y / x.detach(), torch.zeros_like(y))
    return y + (x - x.detach()) * ratio


def _halve_input(module, args):
    """The uniform rule on gate ⊙ up: half the gradient into the product (each factor gets half)."""
    return (_scale_grad(args[0], 0.5), *args[1:])


def _gated_downs(lm) -> list:
    """The down projections of gated FF blocks (gate_proj / gate_up_proj beside a down_proj)."""
    out = []
    for layer in lm.layers:
        for m in layer.modules():
            if (hasattr(m, "gate_proj") or hasattr(m, "gate_up_proj")) and isinstance(
                getattr(m, "down_proj", None), torch.nn.Module
            ):
                out.append(m.down_proj)
    return out


def _bias_like(lm, emb_module) -> list[torch.nn.Parameter]:
    """Parameters added, not multiplied, in the forward pass: every bias, and every embedding table but the
    token embedding (positions, segments) — the relevance they absorb is ⟨b, ∂F/∂b⟩."""
    out = [p for n, p in lm.model.named_parameters() if n.endswith("bias")]
    for m in lm.model.modules():
        if isinstance(m, torch.nn.Embedding) and m is not emb_module:
            out.append(m.weight)
    return out


def _hooks(lm, layer_of: dict, seen: set) -> list:
    handles = [m.register_forward_hook(_freeze_norm) for m in lm.model.modules() if _is_norm(m)]
    for m in lm.model.modules():
        if _is_activation(m):
            handles.append(m.register_forward_hook(functools.partial(_identity_rule, seen, layer_of.get(id(m)))))
    handles += [m.register_forward_pre_hook(_halve_input) for m in _gated_downs(lm)]
    return handles


def attn_lrp(session, token=None, foil=None, position: int = -1, target: InterventionTarget | None = None) -> Relevance:
    t, state = logit_target(session, token, foil, position, target, "AttnLRP")
    lm = t.lm
    L, H = lm.n_layers, lm.n_heads
    layer_of = state["layer_of"]
    state.update(softmax=[], unseen=False)
    if not attention_interface.add(_choose):  # pragma: no cover - transformers < 5
        raise RuntimeError("this transformers has no attention-function interface (needs transformers >= 5)")
    emb_module = lm.model.get_input_embeddings()
    params = _bias_like(lm, emb_module)
    flags = [p.requires_grad for p in params]
    seen: set = set()
    handles = _hooks(lm, layer_of, seen)
    kwargs = intervene.model_inputs(lm, t.encoded, 1)
    ids = kwargs.pop("input_ids")
    try:
        for p in params:
            p.requires_grad_(True)
        with torch.enable_grad(), attention_interface.thread_state(_STATE, "state", state):
            emb = emb_module(ids).detach().requires_grad_(True)
            states = lm.model(inputs_embeds=emb, **kwargs).last_hidden_state[:, t.i]
            if len(seen - {None}) < L:
                raise NotApplicableError(
                    f"AttnLRP needs each FF block's activation as a module it can hook; {lm.name!r} applies it "
                    f"in {L - len(seen - {None})} of {L} layers some other way."
                )
            f = intervene.scores(t.readout, states, t.token, t.foil).sum()
            keeps = [state[l] for l in range(L)]
            grads = torch.autograd.grad(f, [emb, states, *keeps, *params], allow_unused=True)
    finally:
        for h in handles:
            h.remove()
        for p, flag in zip(params, flags):
            p.requires_grad_(flag)
    g_emb, g_states, g_keep, g_params = grads[0], grads[1], grads[2 : 2 + L], grads[2 + L :]
    if g_emb is None:  # pragma: no cover
        raise RuntimeError("no gradient reached the embeddings")
    tokens = (emb.detach().to(torch.float64) * g_emb.to(torch.float64)).sum(-1)[0].cpu().numpy()
    heads = np.stack([g[0].cpu().numpy() if g is not None else np.zeros(H) for g in g_keep])
    readout = float(f.detach()) - float((states.detach().to(torch.float64) * g_states.to(torch.float64)).sum())
    biases = readout + sum(
        float((p.detach().to(torch.float64) * g.to(torch.float64)).sum())
        for p, g in zip(params, g_params)
        if g is not None
    )
    softmax = float("nan") if state["unseen"] else float(sum(state["softmax"]))
    return Relevance.of(t, tokens, heads, name=NAME, biases=biases, softmax=softmax)
