"""Prediction attribution: why this token (rather than that one), exactly, from the one recorded pass.

    predict(session, top, position)               candidates best first (.token, .id, .prob, .logit)
    explain(session, token, foil, position)       an :class:`Explanation`: direct parts through the final norm
                                                  (heads [L,H,n], attn_bias [L], ff [L], embedding, final_bias)
                                                  and propagated parts (sources [n], bias, sources_by_layer
                                                  [L+1, n]), each summing to total
    logit_lens(session, position)                 [L+1, V] log-probabilities (nostalgebraist 2020)
    layer_parts(ctx, rows)                        one layer's residual writes as d-vectors (for routes, pages)
    routes(session, position, threshold)          information-flow routes (Ferrando & Voita 2024) to a prediction

Modules: :mod:`.readout` (final norm + LM head), :mod:`.predict`, :mod:`.lens`, :mod:`.direct`,
:mod:`.adjoint` (``sources`` by one backward pass through the frozen coefficients), :mod:`.propagate` (the same
numbers by DecompX's forward propagation with the biases as one part: the tests' reference), :mod:`.result`,
:mod:`.cli` (``normviz explain``). An encoder–decoder's decoder rows: :mod:`normviz.attribution.seq2seq` (above this
package: it adds the cross blocks and the encoder's parts). ``Session.predict/explain/logit_lens`` call these.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass

import torch

from ..core.errors import NormvizError
from . import adjoint
from .direct import LayerParts, direct_logits, layer_parts
from .flow import Routes, routes
from .lens import logit_lens, residual_states
from .predict import Candidate, final_state, logits_at, position_index, predict, token_id, token_text
from .readout import NoHeadError, Readout, readout_of, stack_view
from .result import Explanation

POST_LN_REFUSAL = (
    "the direct parts (heads, attn_bias, ff, embedding, final_bias) need a pre-LN stack, whose "
    "residual stream reaches the final norm unchanged; {name!r} normalises after every block "
    "(post-LN), so no component has a direct path to the logit. Use sources / bias, which carry "
    "every token through every norm."
)


def actual_next(session, position: int = -1) -> int:
    """The text's own next token after ``position`` (encoder–decoders: the target token decoder row
    ``position`` predicts)."""
    if getattr(session, "is_encoder_decoder", False):
        labels = session.part.seq2seq.labels
        return int(labels.ids[position_index(position, len(labels.ids))])
    ids = session.encoded.ids
    i = position_index(position, len(ids))
    if i + 1 >= len(ids):
        raise NormvizError(
            f"position {i} is the text's last token: it has no next token in the text; "
            "explain a prediction (token=None) or an earlier position."
        )
    return int(ids[i + 1])


def _lock(session):
    return getattr(getattr(session, "store", None), "lock", None) or nullcontext()


@dataclass
class Target:
    """What is explained: token w (minus foil f) at position i; u = W_U[w] − W_U[f] and the head's bias
    difference b; x^L_i, whose norm scale the readout uses; total, the model's own logit (difference)."""

    i: int
    token: int
    foil: int | None
    total: float
    u: torch.Tensor
    b: float
    x_last: torch.Tensor


def target(lm, readout: Readout, views, token, foil, position: int) -> Target:
    """Resolve token (None: the top prediction), foil and position on a stack's recorded views."""
    i = position_index(position, len(views[0].rec.x))
    logits = logits_at(readout, views, i).to(torch.float64)
    w = int(logits.argmax()) if token is None else token_id(lm.tokenizer, token, readout.vocab_size, "token")
    f = None if foil is None else token_id(lm.tokenizer, foil, readout.vocab_size, "foil")
    if f is not None and f == w:
        raise NormvizError("token and foil are the same token: their logit difference is 0 by definition.")
    raw = None
    if readout.softcap is not None:  # θ of each row at the uncapped logits: the capped logit's direction
        raw = readout.uncapped(final_state(views, i)[None])[0].to(torch.float64)
    u, b = readout.direction(w, f, raw)
    return Target(
        i=i,
        token=w,
        foil=f,
        total=float(logits[w] - (logits[f] if f is not None else 0.0)),
        u=u,
        b=b,
        x_last=views[-1].rec.out[i],
    )


def direct_fields(lm, readout: Readout, views, t: Target, crosses=None) -> tuple[dict | None, str | None]:
    """(the direct parts as Explanation fields, None) on a pre-LN stack with a linear readout, else (None, why)."""
    if lm.spec.placement != "pre" or not readout.linear:
        return None, POST_LN_REFUSAL.format(name=lm.name)
    u = t.u.to(torch.float64)
    parts = direct_logits(views, t.i, readout.vector(u, t.x_last.to(torch.float64)), crosses=crosses)
    out = {
        "heads": parts.heads.numpy(),
        "attn_bias": parts.attn_bias.numpy(),
        "ff": parts.ff.numpy(),
        "embedding": parts.embedding,
        "final_bias": readout.constant(u, t.b),
    }
    if parts.ff_by_expert is not None:
        out["ff_by_expert"] = parts.ff_by_expert.numpy()
    if crosses is not None:
        out.update(cross_heads=parts.cross_heads.numpy(), cross_bias=parts.cross_bias.numpy())
    return out, None


def explanation(lm, t: Target, tokens, direct, refusal, sources, token_ids=None, **extra) -> Explanation:
    """The Explanation of target ``t``; ``token_ids``: the ids of ``tokens`` (their readable texts are then
    the tokenizer's decoding of each, as the predicted token's is: ' capital', not the vocabulary's 'Ġcapital')."""
    tok = lm.tokenizer
    if token_ids is not None:
        extra.update(
            token_ids=[int(i) for i in token_ids],
            token_texts=[token_text(tok, int(i)) for i in token_ids] if tok is not None else None,
        )
    return Explanation(
        token=t.token,
        token_text=token_text(tok, t.token),
        foil=t.foil,
        foil_text=token_text(tok, t.foil) if t.foil is not None else None,
        position=t.i,
        total=t.total,
        tokens=list(tokens),
        direct=direct,
        direct_refusal=refusal,
        sources=sources,
        **extra,
    )


@torch.no_grad()
def explain(session, token=None, foil=None, position: int = -1) -> Explanation:
    """Explain the logit of ``token`` (None: the top-1 prediction) minus that of ``foil`` (None: the logit
    itself) at ``position``. See :mod:`normviz.attribution.result` for the fields and identities."""
    lm = session.lm
    readout = readout_of(lm)
    with _lock(session):
        # a pass recorded now keeps the FF pre-activations for sources (within the bytes of FF factors kept per text;
        # none where sources would be refused)
        keep = int(session.options.get("explain_cache_bytes", adjoint.CACHE_BYTES))
        views = session.layers(ff=keep if sources_refusal(session) is None else 0)
        t = target(lm, readout, views, token, foil, position)
        direct, refusal = direct_fields(lm, readout, views, t)
    request, options, itemsize = session.request, dict(session.options), views[0].rec.x.element_size()

    def sources():
        adjoint.check(request, options, itemsize)
        with _lock(session):
            return adjoint.backward(session.layers(), readout, t, frozen(session))

    ids = session.encoded.ids if len(session.encoded.ids) == len(session.tokens) else None
    return explanation(lm, t, session.tokens, direct, refusal, sources, token_ids=ids)


def frozen(session) -> adjoint.Frozen:
    """The session's frozen coefficients shared by every candidate, foil and position of its text (the FF
    factors, within the option ``explain_cache_bytes``): a new candidate costs one backward pass."""
    got = session.store.frozen
    if got is None:
        got = adjoint.Frozen(int(session.options.get("explain_cache_bytes", adjoint.CACHE_BYTES)))
        session.store.frozen = got
    return got


def sources_refusal(session) -> str | None:
    """Why ``sources`` would be refused for this session (cost), or None; runs nothing."""
    try:
        adjoint.check(session.request, dict(session.options))
    except NormvizError as exc:
        return str(exc)
    return None


__all__ = [
    "Candidate",
    "Explanation",
    "LayerParts",
    "NoHeadError",
    "Readout",
    "Target",
    "actual_next",
    "explain",
    "stack_view",
    "layer_parts",
    "logit_lens",
    "predict",
    "readout_of",
    "residual_states",
    "Routes",
    "routes",
    "sources_refusal",
    "token_id",
]
