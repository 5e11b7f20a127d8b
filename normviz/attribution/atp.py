"""Attribution patching: the first-order estimate of head ablation, AtP*'s fix for saturated attention, EAP-IG.

    atp(session, token, foil, position,      delta[l, h] ≈ ablate_heads(...).delta[l, h]: the score's loss when
        ablation="zero"|"mean",              head (l, h)'s output before W^O is zeroed (or set to its mean,
        means=None, qk_fix=False)            ``means`` [L, H, d_head] from :func:`.knockout.head_means`)
    eap_ig(session, token, foil, position,   EAP-IG's head scores (Hanna et al. 2024): integrated gradients along
           ablation, means, steps=16)        the path from every head ablated to none; ``.gap`` its completeness gap

Write o_lh for head (l, h)'s output before W^O (all positions) and F for the score the interventions use (the
logit of ``token`` minus that of ``foil`` at ``position``). Ablation replaces o_lh by o'_lh (0, or the mean at
every position). **AtP** (Nanda 2022; Syed et al. 2023) is the first-order Taylor estimate of the loss:

    delta_AtP[l, h] = −⟨∂F/∂o_lh, o'_lh − o_lh⟩ = Σ_positions ⟨∂F/∂o_lh, o_lh − o'_lh⟩

all heads at once from one forward and one backward pass: with o_lh scaled by a factor k_lh (and o' added with
1 − k_lh), delta_AtP = ∂F/∂k_lh at k = 1.

**AtP\\*'s QK fix** (Kramár et al. 2024, §3.1.1). A head's ablation changes what later heads attend to; when
their softmax saturates, the linear estimate of that change is far off (a score moving by 10 moves a saturated
weight by almost 0 to first order, but by almost 1 in fact). The fix keeps the first-order change of every later
head's attention *scores*, Δs = J_s·(o' − o), and recomputes the softmax exactly: the pattern change
A(s + Δs) − A(s) replaces its linearisation J_A·(o' − o), each weighted by ∂F/∂A (the score's gradient through
the pattern, all else first order as in AtP):

    delta_AtP*[l, h] = delta_AtP[l, h] − Σ_{l' > l, h'} ⟨∂F/∂A^{l'h'}, A(s + Δs) − A(s) − J_A·(o' − o)⟩

Δs comes from forward-mode differentiation (one dual pass per batch of ablated heads); it is read from the
pattern's own tangent (Δs − Σ_k A_ik Δs_ik = dA_ij / A_ij; the softmax ignores a row's constant), so any
attention function works, masks and soft-caps included. Cost: AtP one forward + backward pass; the QK fix adds
about L·H forward-mode copies, batched like head ablation and refused by its budget (``head_ablation_budget_s``).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np
import torch
from torch.autograd import forward_ad

from ..core.errors import NormvizError
from ..record import attention_interface
from . import intervene
from .knockout import InterventionTarget, check

_STATE = threading.local()
ABLATIONS = ("zero", "mean")


@dataclass
class AtP:
    """``delta`` [L, H] (numpy float64): the estimated loss of the score per ablated head, like
    :class:`normviz.attribution.knockout.Intervention`'s."""

    delta: np.ndarray
    total: float
    measure: str  # "logit" | "logit difference"
    ablation: str  # "zero" | "mean"
    qk_fix: bool
    token: int
    token_text: str
    foil: int | None
    foil_text: str | None
    position: int
    tokens: list[str]
    passes: int  # forward passes run (a backward pass counted with its forward)
    linear: np.ndarray | None = None  # with qk_fix: the plain AtP estimate beside it

    @property
    def kind(self) -> str:
        return ("AtP*" if self.qk_fix else "AtP") + f" ({self.ablation} ablation)"


@dataclass
class _Pass:
    """One pass's state, read by :func:`_edited` in this thread."""

    layer_of: dict[int, int]
    keep: dict[int, torch.Tensor]  # layer -> [B, H] factor on each head's output (a leaf with grad, or dual)
    means: torch.Tensor | None  # [L, H, d_head]: mean ablation's o', added with weight 1 − keep
    weights: dict[int, torch.Tensor]  # backward pass: layer -> A [1, H, n, n] kept with its gradient
    grads: dict[int, torch.Tensor] | None = None  # dual pass: layer -> ∂F/∂A [H, n, n]
    correction: torch.Tensor | None = None  # dual pass: [B] Σ ⟨∂F/∂A, A(s + Δs) − A − dA⟩


def _edited(fn, p: _Pass, module, query, key, value, attention_mask, *args, **kwargs):
    layer = p.layer_of.get(id(module))
    if layer is None:
        return fn(module, query, key, value, attention_mask, *args, **kwargs)
    out, weights = fn(module, query, key, value, attention_mask, *args, **kwargs)
    if p.grads is None:
        if weights.requires_grad:
            weights.retain_grad()
            p.weights[layer] = weights
    elif layer in p.grads:
        a, da = forward_ad.unpack_dual(weights)
        if da is not None:
            p.correction = p.correction + _softmax_gap(a.detach(), da.detach(), p.grads[layer])
    k = p.keep[layer].to(out.dtype)[:, None, :, None]  # out [B, n, H, d_head]
    out = out * k
    if p.means is not None:
        out = out + (1 - k) * p.means[layer].to(out.dtype)[None, None]
    return out, weights


def _softmax_gap(a: torch.Tensor, da: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """[B]: Σ_{h,i,j} grad · (softmax(s + Δs) − A − dA), with Δs up to each row's constant = dA / A where A > 0
    (weights that are exactly 0 — masked — stay 0)."""
    a64, da64 = a.to(torch.float64), da.to(torch.float64)
    live = a64 > 0
    ds = torch.where(live, da64 / torch.where(live, a64, 1.0), 0.0)
    top = torch.where(live, ds, float("-inf")).amax(-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, 0.0)
    e = a64 * torch.exp(torch.where(live, ds - top, float("-inf")))
    # each row keeps its own sum (the model's softmax may run in float32: a row sums to 1 within 1e-7)
    new = e * (a64.sum(-1, keepdim=True) / e.sum(-1, keepdim=True).clamp_min(torch.finfo(torch.float64).tiny))
    return ((new - a64 - da64) * grad[None]).sum((1, 2, 3))


def _choose(fn):
    p = getattr(_STATE, "edits", None)
    return fn if p is None else functools.partial(_edited, fn, p)


def _score(t: InterventionTarget, p: _Pass, batch: int) -> torch.Tensor:
    """[batch] the score of ``batch`` copies of the text under ``p`` (autograd on)."""
    if not attention_interface.add(_choose):  # pragma: no cover - transformers < 5
        raise RuntimeError("this transformers has no attention-function interface (needs transformers >= 5)")
    with torch.enable_grad(), attention_interface.thread_state(_STATE, "edits", p):
        states = t.lm.model(**intervene.model_inputs(t.lm, t.encoded, batch)).last_hidden_state[:, t.i]
        return intervene.scores(t.readout, states, t.token, t.foil)


def _means(lm, ablation: str, means):
    if ablation not in ABLATIONS:
        raise NormvizError(f"ablation must be one of {ABLATIONS}, got {ablation!r}.")
    if ablation == "zero":
        if means is not None:
            raise NormvizError("means are mean ablation's values: pass ablation='mean' with them.")
        return None
    if means is None:
        raise NormvizError(
            "mean ablation needs each head's mean output: means=head_means(lm, texts) "
            "(normviz.attribution.knockout.head_means), [L, H, d_head]."
        )
    m = torch.as_tensor(np.asarray(means))
    if m.ndim != 3 or tuple(m.shape[:2]) != (lm.n_layers, lm.n_heads):
        raise NormvizError(
            f"means must be [L, H, d_head] = [{lm.n_layers}, {lm.n_heads}, …] (from head_means), got {tuple(m.shape)}."
        )
    return m.to(device=lm.device, dtype=lm.dtype)


def atp(
    session,
    token=None,
    foil=None,
    position: int = -1,
    ablation: str = "zero",
    means=None,
    qk_fix: bool = False,
    target: InterventionTarget | None = None,
) -> AtP:
    """AtP (``qk_fix`` False) or AtP* with the QK fix: the first-order estimate of
    :func:`normviz.attribution.knockout.ablate_heads` (module docstring)."""
    t = target or InterventionTarget(session, token, foil, position)
    if t.readout is None:
        raise NormvizError(
            "AtP estimates the loss of a logit: this model has no LM head (use ablate_heads, whose "
            "measure is how far the final state moves)."
        )
    lm = t.lm
    L, H = lm.n_layers, lm.n_heads
    m = _means(lm, ablation, means)
    if qk_fix:
        check(session.request, "head_ablation", dict(session.options))
    layer_of = intervene.layer_index(lm)
    keep = {l: torch.ones((1, H), dtype=torch.float64, device=lm.device, requires_grad=True) for l in range(L)}
    p = _Pass(layer_of, keep, m, {})
    f = _score(t, p, 1)
    passes = 1
    grads_a = [k for k in p.weights]
    f.sum().backward()
    linear = torch.stack([keep[l].grad[0] for l in range(L)]).cpu().numpy()  # ∂F/∂k = delta_AtP
    delta = linear
    if qk_fix:
        grads = {l: p.weights[l].grad[0].detach() for l in grads_a if p.weights[l].grad is not None}
        correction = np.zeros(L * H)
        n = len(t.encoded.ids)
        with torch.no_grad(), forward_ad.dual_level():
            for start, stop in intervene.chunks(L * H, n, t.batch_tokens):
                b = stop - start
                tangents = {l: torch.zeros((b, H), dtype=torch.float64, device=lm.device) for l in range(L)}
                for row, node in enumerate(range(start, stop)):
                    layer, head = divmod(node, H)
                    tangents[layer][row, head] = -1.0  # k: 1 → 0, o → o'
                duals = {
                    l: forward_ad.make_dual(torch.ones((b, H), dtype=torch.float64, device=lm.device), tangents[l])
                    for l in range(L)
                }
                q = _Pass(
                    layer_of,
                    duals,
                    m,
                    {},
                    grads=grads,
                    correction=torch.zeros(b, dtype=torch.float64, device=lm.device),
                )
                _score(t, q, b)
                passes += 1
                correction[start:stop] = q.correction.cpu().numpy()
        delta = linear - correction.reshape(L, H)
    tok = lm.tokenizer
    from .predict import token_text

    return AtP(
        delta=delta,
        total=t.total,
        measure=t.measure,
        ablation=ablation,
        qk_fix=qk_fix,
        token=t.token,
        token_text=token_text(tok, t.token),
        foil=t.foil,
        foil_text=None if t.foil is None else token_text(tok, t.foil),
        position=t.i,
        tokens=list(session.tokens),
        passes=passes,
        linear=linear if qk_fix else None,
    )


@dataclass
class EapIG:
    """EAP-IG's head (node) scores: ``delta`` [L, H], integrated gradients of the score along the straight path
    from every head ablated to none, all heads at once; ``gap`` = (total − ablated) − Σ delta, the completeness
    gap of the ``steps``-point midpoint rule (0 for the exact integral)."""

    delta: np.ndarray
    total: float  # F with no head ablated
    ablated: float  # F with every head ablated at once
    gap: float
    steps: int
    ablation: str
    token: int
    foil: int | None
    position: int
    passes: int


def eap_ig(
    session,
    token=None,
    foil=None,
    position: int = -1,
    ablation: str = "zero",
    means=None,
    steps: int = 16,
    target: InterventionTarget | None = None,
) -> EapIG:
    """EAP-IG (Hanna et al. 2024) on heads: every head's output before W^O on the path o'(1 − t) + o·t, t from 0
    (all ablated) to 1 (the real pass); delta[l, h] = ∫₀¹ ∂F/∂k_lh dt by the midpoint rule with ``steps`` points
    (one batched pass and one backward pass), so Σ delta ≈ F(1) − F(0) (``gap`` says how nearly)."""
    if steps < 1:
        raise NormvizError(f"EAP-IG needs at least 1 step, got {steps}.")
    t = target or InterventionTarget(session, token, foil, position)
    if t.readout is None:
        raise NormvizError("EAP-IG integrates the gradient of a logit: this model has no LM head.")
    lm = t.lm
    L, H = lm.n_layers, lm.n_heads
    m = _means(lm, ablation, means)
    layer_of = intervene.layer_index(lm)
    nodes = ((torch.arange(steps, dtype=torch.float64) + 0.5) / steps).to(lm.device)
    delta, passes = np.zeros((L, H)), 0
    n = len(t.encoded.ids)
    for start, stop in intervene.chunks(steps, n, t.batch_tokens):
        keep = {l: nodes[start:stop, None].repeat(1, H).clone().requires_grad_(True) for l in range(L)}
        f = _score(t, _Pass(layer_of, keep, m, {}), stop - start)
        f.sum().backward()
        passes += 1
        delta += torch.stack([keep[l].grad.sum(0) for l in range(L)]).cpu().numpy() / steps
    with torch.no_grad():
        zero = {l: torch.zeros((1, H), dtype=torch.float64, device=lm.device) for l in range(L)}
        ablated = float(_score(t, _Pass(layer_of, zero, m, {}), 1)[0])
    passes += 1
    return EapIG(
        delta=delta,
        total=t.total,
        ablated=ablated,
        gap=float(t.total - ablated - delta.sum()),
        steps=steps,
        ablation=ablation,
        token=t.token,
        foil=t.foil,
        position=t.i,
        passes=passes,
    )
