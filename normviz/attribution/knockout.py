"""Ground truth by intervention: what the prediction loses when a route is cut, on the model's own forward pass.

    knockout(session, token, foil, position)      delta[j] = total − score with every attention edge from source
                                                  token j into every other position blocked, in every layer and
                                                  head (pre-softmax −∞, rows renormalised; j's own row kept:
                                                  Geva et al. 2023's attention knockout, applied to all layers)
    ablate_heads(session, token, foil, position,  delta[l, h] = total − score with head (l, h)'s output before W^O
                 means=None)                      set to 0 at every position (zero ablation), or to its mean over a
                                                  corpus (``means`` from :func:`head_means`: mean ablation)

score is the logit of ``token`` minus that of ``foil`` at ``position`` (token None: the top prediction of the
unchanged model; foil None: the logit itself). A model without an LM head (a sentence encoder) has no logit:
there delta[j] = ‖h_i − h̃_i‖, how far the final hidden state at the position moves (``measure = "state"``).
Each intervention is one copy in a batched pass (:mod:`.intervene`); the passes are cost-checked first
(options ``knockout_budget_s``, ``head_ablation_budget_s``; :func:`check`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..core.errors import NormvizError
from ..methods import head_ablation as _head_family
from ..methods import knockout as _knockout_family
from ..methods.base import Request
from ..models.floor import require_row
from . import intervene
from .predict import position_index, token_id, token_text
from .readout import NoHeadError, readout_of

BATCH_TOKENS = 4096  # tokens per batched pass (option intervention_batch_tokens)


@dataclass
class Intervention:
    """``delta`` (numpy float64): total minus the intervened score, one per intervention ([n] or [L, H])."""

    kind: str  # "knockout" | "head zero ablation" | "head mean ablation"
    delta: np.ndarray
    total: float  # the unchanged score (measure "state": ‖h_i‖)
    measure: str  # "logit" | "logit difference" | "state"
    token: int | None
    token_text: str | None
    foil: int | None
    foil_text: str | None
    position: int
    tokens: list[str]
    passes: int  # batched forward passes run

    @property
    def question(self) -> str:
        """What delta answers, in one sentence."""
        route = "the attention edges out of each token" if self.kind == "knockout" else "each attention head's output"
        return f"How much does the {self.measure} fall when {route} are cut (necessity of a route)?"


def check(request: Request, kind: str, options: dict) -> None:
    """Refuse (TooCostlyError) when the passes of ``kind`` ("knockout": n + 1; "head_ablation": L·H + 1) would
    exceed their family's budget (:mod:`normviz.methods.knockout`, :mod:`normviz.methods.head_ablation`)."""
    (_knockout_family if kind == "knockout" else _head_family).check(request, kind, options)


class InterventionTarget:
    """The prediction an intervention is scored on (token, foil, position resolved by one unchanged pass) and
    ``deltas`` of batched passes: total − score (measure "state": ‖h_i − h̃_i‖)."""

    def __init__(self, session, token=None, foil=None, position: int = -1):
        lm = session.lm
        require_row(lm, "interventions (knockout, ablate_heads)")  # the floor: its attention may bypass the hooks
        if getattr(session, "is_encoder_decoder", False):
            raise NormvizError("interventions run on self-attention models; for an encoder–decoder use Explain.")
        self.lm, self.encoded = lm, session.encoded
        self.i = position_index(position, len(self.encoded.ids))
        try:
            self.readout = readout_of(lm)
        except NoHeadError:
            self.readout = None
            if token is not None or foil is not None:
                raise
        self.batch_tokens = int(session.options.get("intervention_batch_tokens", BATCH_TOKENS))
        base = intervene.final_states(lm, self.encoded, self.i, None, 1)
        tok = lm.tokenizer
        if self.readout is None:
            self.token = self.foil = self.runner_up = None
            self.base = base[0].to(torch.float64)
            self.total, self.measure = float(self.base.norm()), "state"
        else:
            vocab = self.readout.vocab_size
            logits = self.readout.logits(base)[0]
            self.token = int(logits.argmax()) if token is None else token_id(tok, token, vocab, "token")
            others = logits.clone()
            others[self.token] = float("-inf")
            self.runner_up = int(others.argmax())  # the best candidate but the token (a foil rule's pick)
            self.foil = None if foil is None else token_id(tok, foil, vocab, "foil")
            if self.foil == self.token:
                raise NormvizError("token and foil are the same token: their logit difference is 0 by definition.")
            self.total = float(intervene.scores(self.readout, base, self.token, self.foil)[0])
            self.measure = "logit difference" if self.foil is not None else "logit"
        self.passes = 1

    def deltas(self, edits: intervene.Edits, batch: int) -> np.ndarray:
        return self._deltas(intervene.final_states(self.lm, self.encoded, self.i, edits, batch))

    def deltas_of_ids(self, ids: torch.Tensor) -> np.ndarray:
        """Deltas of other token ids of the same length [B, n] (tokens replaced), no other change."""
        return self._deltas(intervene.final_states(self.lm, self.encoded, self.i, None, ids.shape[0], ids))

    def _deltas(self, states: torch.Tensor) -> np.ndarray:
        self.passes += 1
        if self.readout is None:
            return (states.to(torch.float64) - self.base).norm(dim=-1).cpu().numpy()
        return self.total - intervene.scores(self.readout, states, self.token, self.foil).cpu().numpy()

    def result(self, kind: str, delta: np.ndarray, tokens) -> Intervention:
        tok = self.lm.tokenizer
        return Intervention(
            kind=kind,
            delta=delta,
            total=self.total,
            measure=self.measure,
            token=self.token,
            token_text=None if self.token is None else token_text(tok, self.token),
            foil=self.foil,
            foil_text=None if self.foil is None else token_text(tok, self.foil),
            position=self.i,
            tokens=list(tokens),
            passes=self.passes,
        )


def knockout_mask(n: int, sources: range, dtype=torch.float64) -> torch.Tensor:
    """[len(sources), 1, n, n] additive masks: copy b blocks every edge i ← sources[b] with i ≠ sources[b]."""
    mask = torch.zeros((len(sources), 1, n, n), dtype=dtype)
    for b, j in enumerate(sources):
        mask[b, 0, :, j] = float("-inf")
        mask[b, 0, j, j] = 0.0
    return mask


def knockout(
    session, token=None, foil=None, position: int = -1, target: InterventionTarget | None = None
) -> Intervention:
    """Attention knockout of each source token in every layer and head (module docstring); ``target``: one
    resolved already (then token, foil, position are its own)."""
    check(session.request, "knockout", dict(session.options))
    t = target or InterventionTarget(session, token, foil, position)
    n, L = len(t.encoded.ids), t.lm.n_layers
    delta = np.empty(n)
    for start, stop in intervene.chunks(n, n, t.batch_tokens):
        mask = knockout_mask(n, range(start, stop), t.lm.dtype).to(t.lm.device)
        delta[start:stop] = t.deltas(intervene.Edits(masks={l: mask for l in range(L)}), stop - start)
    return t.result("knockout", delta, session.tokens)


def ablate_heads(
    session, token=None, foil=None, position: int = -1, means=None, target: InterventionTarget | None = None
) -> Intervention:
    """Zero ablation (``means`` None) or mean ablation (``means`` [L, H, d_head], :func:`head_means`) of each
    head's output before W^O at every position (module docstring)."""
    check(session.request, "head_ablation", dict(session.options))
    t = target or InterventionTarget(session, token, foil, position)
    lm, n = t.lm, len(t.encoded.ids)
    L, H = lm.n_layers, lm.n_heads
    means = None if means is None else torch.as_tensor(np.asarray(means))
    if means is not None and (means.ndim != 3 or tuple(means.shape[:2]) != (L, H)):
        raise NormvizError(f"means must be [L, H, d_head] = [{L}, {H}, …] (from head_means), got {tuple(means.shape)}.")
    delta = np.empty(L * H)
    for start, stop in intervene.chunks(L * H, n, t.batch_tokens):
        edits = intervene.Edits()
        for b, k in enumerate(range(start, stop)):
            layer, head = divmod(k, H)
            if layer not in edits.keep:
                edits.keep[layer] = torch.ones((stop - start, H), dtype=lm.dtype, device=lm.device)
                if means is not None:
                    edits.fill[layer] = torch.zeros((stop - start, H, means.shape[2]), dtype=lm.dtype, device=lm.device)
            edits.keep[layer][b, head] = 0.0
            if means is not None:
                edits.fill[layer][b, head] = means[layer, head].to(lm.dtype)
        delta[start:stop] = t.deltas(edits, stop - start)
    kind = "head zero ablation" if means is None else "head mean ablation"
    return t.result(kind, delta.reshape(L, H), session.tokens)


def head_means(lm, texts, max_tokens: int | None = None) -> np.ndarray:
    """[L, H, d_head] float64: each head's output before W^O averaged over every position of ``texts``, the
    mean-ablation values of :func:`ablate_heads`."""
    from ..core.tokens import encode

    limit = min(max_tokens, lm.max_length) if max_tokens else lm.max_length
    return head_means_of(lm, [encode(lm.tokenizer, t, None, max_length=limit, decoder=lm.spec.causal) for t in texts])


def head_means_of(lm, encoded) -> np.ndarray:
    """:func:`head_means` of tokenised texts (one unchanged pass each)."""
    sums, count = intervene.Edits(sums={}), 0
    for enc in encoded:
        intervene.final_states(lm, enc, 0, sums, 1)
        count += len(enc.ids)
    if not count:
        raise NormvizError("head_means needs at least one non-empty text.")
    return torch.stack([sums.sums[l] for l in range(lm.n_layers)]).cpu().numpy() / count
