"""Gradient baselines over the input embeddings e_j (the word embeddings the model's forward takes as
``inputs_embeds``; position and segment embeddings are added inside and are not attributed):

    input × gradient          a_j = ⟨e_j, ∂F/∂e_j⟩ (Shrikumar et al. 2017; Denil et al. 2014)
    integrated gradients      a_j = ⟨e_j − b_j, ∫₀¹ ∂F/∂e_j(b + t(e − b)) dt⟩ (Sundararajan et al. 2017), the
                              integral by the midpoint rule with ``steps`` nodes; b_j the embedding of one
                              baseline token at every position (:func:`baseline_token`: pad, else unk, else eos)

F is the score the interventions use: the logit (difference) at the position; without an LM head ⟨h_i, ĥ⟩ with
ĥ = h_i/‖h_i‖ fixed at the real input (F(e) = ‖h_i‖ there). Each result states its completeness gap: F(e) − Σ a
for input × gradient, F(e) − F(b) − Σ a for integrated gradients (0 for an exact attribution).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.errors import NormvizError
from . import intervene


@dataclass
class GradientAttribution:
    name: str
    values: np.ndarray  # [n]
    gap: float  # completeness gap (module docstring)
    baseline: str  # what the baseline is ("none" for input × gradient)


def baseline_token(tokenizer, baseline_id: int | None = None) -> tuple[int, str]:
    """(id, text) of the baseline token: ``baseline_id`` when given, else the tokenizer's pad token, else unk,
    else eos."""
    if baseline_id is not None:
        text = tokenizer.decode([int(baseline_id)]) if tokenizer is not None else f"id {int(baseline_id)}"
        return int(baseline_id), text
    for name in ("pad_token", "unk_token", "eos_token"):
        tid = getattr(tokenizer, f"{name}_id", None) if tokenizer is not None else None
        if tid is not None:
            return int(tid), str(getattr(tokenizer, name))
    raise NormvizError("this tokenizer has no pad, unk or eos token to use as the baseline; pass baseline_id.")


class ScoreFunction:
    """F(e) for batches of input embeddings [B, n, d] of one tokenised text (module docstring)."""

    def __init__(self, lm, readout, encoded, i: int, token: int | None, foil: int | None):
        self.lm, self.readout, self.encoded, self.i = lm, readout, encoded, i
        self.token, self.foil = token, foil
        self.embed = lm.model.get_input_embeddings()
        ids = torch.tensor([encoded.ids], dtype=torch.long, device=lm.device)
        with torch.no_grad():
            self.e = self.embed(ids)[0]
        self.direction = None
        if readout is None:
            with torch.no_grad():
                h = self._states(self.e[None])[0].to(torch.float64)
            self.direction = h / h.norm()

    def _states(self, embeds: torch.Tensor) -> torch.Tensor:
        kwargs = intervene.model_inputs(self.lm, self.encoded, embeds.shape[0])
        kwargs.pop("input_ids")
        return self.lm.model(inputs_embeds=embeds, **kwargs).last_hidden_state[:, self.i]

    def __call__(self, embeds: torch.Tensor) -> torch.Tensor:
        states = self._states(embeds)
        if self.readout is None:
            return states.to(torch.float64) @ self.direction
        return intervene.scores(self.readout, states, self.token, self.foil)

    def gradients(self, embeds: torch.Tensor, batch_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(F [B], ∂F/∂embeds [B, n, d]), in chunks of at most ``batch_tokens`` tokens."""
        values, grads = [], []
        n = embeds.shape[1]
        for start, stop in intervene.chunks(embeds.shape[0], n, batch_tokens):
            x = embeds[start:stop].detach().clone().requires_grad_(True)
            with torch.enable_grad():
                f = self(x)
                (g,) = torch.autograd.grad(f.sum(), x)
            values.append(f.detach())
            grads.append(g.detach())
        return torch.cat(values), torch.cat(grads)


def input_x_gradient(fn: ScoreFunction, batch_tokens: int = 4096) -> GradientAttribution:
    f, g = fn.gradients(fn.e[None], batch_tokens)
    values = (g[0].to(torch.float64) * fn.e.to(torch.float64)).sum(-1).cpu().numpy()
    return GradientAttribution("input_x_gradient", values, float(f[0]) - float(values.sum()), "none")


def integrated_gradients(
    fn: ScoreFunction, baseline_id: int, baseline_text: str, steps: int = 32, batch_tokens: int = 4096
) -> GradientAttribution:
    if steps < 1:
        raise NormvizError(f"integrated gradients needs at least 1 step, got {steps}.")
    with torch.no_grad():
        b = fn.embed(torch.tensor([baseline_id], device=fn.lm.device))[0].expand_as(fn.e)
        t = ((torch.arange(steps, dtype=torch.float64) + 0.5) / steps).to(fn.e.dtype).to(fn.e.device)
        path = b[None] + t[:, None, None] * (fn.e - b)[None]
        f_ends = fn(torch.stack([fn.e, b]))
    _, g = fn.gradients(path, batch_tokens)
    values = (g.to(torch.float64).mean(0) * (fn.e - b).to(torch.float64)).sum(-1).cpu().numpy()
    gap = float(f_ends[0] - f_ends[1]) - float(values.sum())
    return GradientAttribution(
        "integrated_gradients",
        values,
        gap,
        f"the embedding of {baseline_text!r} (id {baseline_id}) at every position, {steps} midpoint steps",
    )
