"""Edge attribution patching: EAP and EAP-IG edge scores between heads, FF blocks and the logits.

    edges(session, token, foil, position,   an :class:`EdgeScores`: for every edge from a head (l, h) to a node
          ablation="zero"|"mean", means,    that reads the residual stream after it — a later head, an FF block,
          steps=None)                       the logits — the first-order loss of the score when that edge alone
                                            carries the ablated head output (steps None: EAP) or its integrated
                                            form along the path from every head ablated to none (steps m: EAP-IG)

Write o_u for head u's output before W^O (all positions), o'_u its ablated value (0, or a mean from
:func:`normviz.attribution.knockout.head_means`), and x_v for the residual stream as node v alone reads it (its
private copy, before any norm in front of v). Patching the edge u → v moves x_v only, by W^O_u (o'_u − o_u).
**EAP** (Syed, Rager & Conmy 2023) is its first-order estimate, for every edge from one backward pass:

    e(u → v) = ⟨W^O_u (o_u − o'_u), ∂F/∂x_v⟩            (summed over positions; the score lost)

**EAP-IG** (Hanna, Pezzelle & Belinkov 2024) averages the gradient over m points of a path instead of taking it
at the real pass. The path here is the one :func:`normviz.attribution.atp.eap_ig` integrates on heads: every
head's output scaled by k (plus (1 − k)·o') with k from 0 (every head ablated) to 1 (the real pass), midpoint
rule; at step t the sender's difference is its own output there:

    e(u → v) = (1/m) Σ_t ⟨W^O_u (o_u(t) − o'_u), ∂F/∂x_v(t)⟩

(MIB's "EAP-IG-activations"; Hanna et al.'s original path interpolates the input embeddings instead.)

The receivers' private gradients: a head's is the vector–Jacobian product of its own output (before W^O) with
∂F/∂(that output), taken back to the layer's input through the layer's norm and projections only (one local
product per head, so any attention function works and grouped K/V are split per query head); the logits' is
∂F/∂(the last layer's output); an FF block's is the rest of its layer's input gradient,
∂F/∂x_l − ∂F/∂x_{l+1} − Σ_h g_(l,h) (sequential and parallel blocks alike). So every head's edges sum to its node
score exactly: Σ_v e(u → v) = AtP's delta[u] (steps None) or eap_ig's delta[u] (same m) — the test.

Cost: one forward and one backward pass of m copies (1 for EAP), plus one local product per head and layer,
checked against the head-ablation family's budget (``head_ablation_budget_s``) at (3 + H)·m forward passes.
Models whose attention write goes through a norm or a multiplier before the residual (Gemma 2/3, OLMo-2, Granite)
or whose blocks are post-LN are refused: W^O_u o_u is not that head's change of x_v there.
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
from .atp import _means
from .knockout import InterventionTarget

_STATE = threading.local()


@dataclass
class EdgeScores:
    """Edge scores from every head (l, h) (the senders), the score lost when that edge carries the ablated output:

    heads   [L, H, L, H]  to head (l', h'): nan unless l' > l
    ff      [L, H, L]     to layer l''s FF block: nan unless l' > l (or l' = l in a sequential block)
    logits  [L, H]        to the logits (the final residual read by the final norm and head)
    """

    heads: np.ndarray
    ff: np.ndarray
    logits: np.ndarray
    total: float  # F unchanged
    ablated: float  # F with every head ablated
    steps: int | None  # None: EAP at the real pass; m: EAP-IG's midpoint points
    ablation: str
    token: int
    foil: int | None
    position: int
    passes: int

    @property
    def kind(self) -> str:
        return ("EAP" if self.steps is None else f"EAP-IG ({self.steps} steps)") + f", {self.ablation} ablation"

    def node(self) -> np.ndarray:
        """[L, H]: each head's edges summed (AtP's / EAP-IG's head score)."""
        return np.nansum(self.heads, (2, 3)) + np.nansum(self.ff, 2) + self.logits

    @property
    def gap(self) -> float:
        """(total − ablated) − Σ over every edge: the completeness gap (EAP-IG's midpoint rule; EAP's first
        order)."""
        return float(self.total - self.ablated - self.node().sum())

    def head_edges(self) -> list[tuple[tuple[int, int], tuple[int, int], float]]:
        """((l, h), (l', h'), score) for every head-to-head edge."""
        L, H = self.logits.shape
        return [
            ((a, b), (c, d), float(self.heads[a, b, c, d]))
            for a in range(L)
            for b in range(H)
            for c in range(a + 1, L)
            for d in range(H)
        ]


@dataclass
class _Pass:
    layer_of: dict[int, int]
    keep: dict[int, torch.Tensor]  # layer -> [B, H] (no grad)
    means: torch.Tensor | None
    outs: dict[int, torch.Tensor]  # layer -> the attention function's output [B, n, H, d_head], grad retained


def _edited(fn, p: _Pass, module, query, key, value, attention_mask, *args, **kwargs):
    layer = p.layer_of.get(id(module))
    out, weights = fn(module, query, key, value, attention_mask, *args, **kwargs)
    if layer is None:
        return out, weights
    if out.requires_grad:
        out.retain_grad()
    p.outs[layer] = out
    k = p.keep[layer].to(out.dtype)[:, None, :, None]
    edited = out * k
    if p.means is not None:
        edited = edited + (1 - k) * p.means[layer].to(out.dtype)[None, None]
    return edited, weights


def _choose(fn):
    p = getattr(_STATE, "edits", None)
    return fn if p is None else functools.partial(_edited, fn, p)


def _refuse(lm) -> None:
    spec = lm.spec
    why = None
    if spec.placement != "pre":
        why = "its blocks are post-LN (the norm sits on the residual stream itself)"
    elif spec.norm_after_attn_out is not None:
        why = "its attention output passes a norm before the residual add"
    elif spec.attn_out_scale is not None:
        why = "its attention output is scaled before the residual add"
    if why is not None:
        raise NormvizError(
            f"edge attribution patching is not defined here: {why}, so a head's W^O·o is not its "
            "change of the residual (use Session.atp / eap_ig for head scores)."
        )


def _w_o(lm, layer: int) -> torch.Tensor:
    """[H, d_head, d]: the output projection per head (write = o_h @ M_h)."""
    from ..models.params import get_path

    proj = get_path(lm.layers[layer], lm.spec.out)
    w: torch.Tensor = proj.weight  # type: ignore[assignment]
    m = w.T if isinstance(proj, torch.nn.Linear) else w  # Conv1D (GPT-2) stores [in, out]
    H = int(lm.n_heads)
    return m.reshape(H, int(m.shape[0]) // H, int(m.shape[1]))


def _residual_hooks(lm, eps: list[torch.Tensor]):
    """Pre-hooks adding eps[l] to layer l's input and a hook adding eps[L] to the last layer's output."""
    handles = []

    def pre(module, args, kwargs, l):
        if args:
            return (args[0] + eps[l].to(args[0].dtype),) + tuple(args[1:]), kwargs
        kwargs = dict(kwargs)
        kwargs["hidden_states"] = kwargs["hidden_states"] + eps[l].to(kwargs["hidden_states"].dtype)
        return args, kwargs

    def post(module, args, output):
        if isinstance(output, tuple):
            return (output[0] + eps[-1].to(output[0].dtype),) + tuple(output[1:])
        return output + eps[-1].to(output.dtype)

    for l, layer in enumerate(lm.layers):
        handles.append(layer.register_forward_pre_hook(functools.partial(pre, l=l), with_kwargs=True))
    handles.append(lm.layers[-1].register_forward_hook(post))
    return handles


def _grad(x: torch.Tensor) -> torch.Tensor:
    if x.grad is None:  # pragma: no cover - every input reaches the score
        raise RuntimeError("no gradient reached a residual input")
    return x.grad.to(torch.float64)


def _check_cost(session, steps: int) -> None:
    from ..methods import head_ablation as family
    from ..methods.base import refuse_over_budget
    from ..methods.knockout import forward_flops

    request = session.request
    refuse_over_budget(
        request,
        "head_ablation",
        dict(session.options),
        family.FAMILY.budget,
        (3 + request.n_heads) * steps * forward_flops(request),
    )


def edges(
    session,
    token=None,
    foil=None,
    position: int = -1,
    ablation: str = "zero",
    means=None,
    steps: int | None = None,
    target: InterventionTarget | None = None,
) -> EdgeScores:
    """EAP (``steps`` None) or EAP-IG (``steps`` m ≥ 1) edge scores (module docstring)."""
    if steps is not None and steps < 1:
        raise NormvizError(f"EAP-IG needs at least 1 step, got {steps}.")
    t: Any = target or InterventionTarget(session, token, foil, position)
    if t.readout is None:
        raise NormvizError("edge attribution patching estimates the loss of a logit: this model has no LM head.")
    lm = t.lm
    _refuse(lm)
    m_abl = _means(lm, ablation, means)
    _check_cost(session, steps or 1)
    L, H, n = lm.n_layers, lm.n_heads, len(t.encoded.ids)
    layer_of = intervene.layer_index(lm)
    nodes = (
        torch.tensor([1.0], dtype=torch.float64)
        if steps is None
        else (torch.arange(steps, dtype=torch.float64) + 0.5) / steps
    )
    count = int(nodes.numel())
    w_o = [_w_o(lm, l).detach().to(torch.float64) for l in range(L)]
    d = w_o[0].shape[-1]
    heads = np.zeros((L, H, L, H))
    ff = np.zeros((L, H, L))
    logits = np.zeros((L, H))
    passes = 0
    if not attention_interface.add(_choose):  # pragma: no cover - transformers < 5
        raise RuntimeError("this transformers has no attention-function interface (needs transformers >= 5)")
    for start, stop in intervene.chunks(count, n, t.batch_tokens):
        B = stop - start
        k = nodes[start:stop].to(lm.device)
        keep = {l: k[:, None].repeat(1, H) for l in range(L)}
        p = _Pass(layer_of, keep, m_abl, {})
        eps = [torch.zeros((B, n, d), dtype=lm.dtype, device=lm.device, requires_grad=True) for _ in range(L + 1)]
        handles = _residual_hooks(lm, eps)
        try:
            with torch.enable_grad(), attention_interface.thread_state(_STATE, "edits", p):
                states = lm.model(**intervene.model_inputs(lm, t.encoded, B)).last_hidden_state[:, t.i]
                f = intervene.scores(t.readout, states, t.token, t.foil)
                f.sum().backward(retain_graph=True)
                passes += 1
                res = [_grad(e) for e in eps]  # ∂F/∂x_l, l = 0 … L
                g_heads = []  # per layer [B, H, n, d]: each head's private input gradient
                for l in range(L):
                    out = p.outs[l]
                    g = _grad(out).to(out.dtype)
                    rows = []
                    for h in range(H):
                        (gh,) = torch.autograd.grad(out[:, :, h], eps[l], g[:, :, h], retain_graph=True)
                        rows.append(gh.to(torch.float64))
                    g_heads.append(torch.stack(rows, 1))
        finally:
            for x in handles:
                x.remove()
        g_ff = [res[l] - res[l + 1] - g_heads[l].sum(1) for l in range(L)]  # [B, n, d]
        for l in range(L):
            o = p.outs[l].detach().to(torch.float64)  # [B, n, H, d_head]: o_u(t)
            diff = o if m_abl is None else o - m_abl[l].to(torch.float64)[None, None]
            write = torch.einsum("bnhk,hkd->bhnd", diff, w_o[l])  # W^O_u (o_u(t) − o'_u), per head
            logits[l] += torch.einsum("bhnd,bnd->h", write, res[L]).cpu().numpy()
            for l2 in range(l, L):
                ff[l, :, l2] += torch.einsum("bhnd,bnd->h", write, g_ff[l2]).cpu().numpy()
                if l2 > l:
                    heads[l, :, l2] += torch.einsum("bhnd,bgnd->hg", write, g_heads[l2]).cpu().numpy()
    heads /= count
    ff /= count
    logits /= count
    for l in range(L):
        heads[l, :, : l + 1] = np.nan
        ff[l, :, :l] = np.nan
        if lm.spec.parallel:  # the FF of a parallel block reads the layer's input, not its heads
            ff[l, :, l] = np.nan
    with torch.no_grad():
        zero = {l: torch.zeros((1, H), dtype=torch.float64, device=lm.device) for l in range(L)}
        attention_interface.add(_choose)
        with attention_interface.thread_state(_STATE, "edits", _Pass(layer_of, zero, m_abl, {})):
            states = lm.model(**intervene.model_inputs(lm, t.encoded, 1)).last_hidden_state[:, t.i]
        ablated = float(intervene.scores(t.readout, states, t.token, t.foil)[0])
    passes += 1
    return EdgeScores(
        heads=heads,
        ff=ff,
        logits=logits,
        total=t.total,
        ablated=ablated,
        steps=steps,
        ablation=ablation,
        token=t.token,
        foil=t.foil,
        position=t.i,
        passes=passes,
    )
