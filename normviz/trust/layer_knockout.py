"""A per-layer ground truth for per-layer maps: knock out one attention edge j → i in one layer only.

    layer_knockout(session, token, foil, position, layers=None, head=None)
        delta[l, i, j] = total − the score with the edge j → i blocked in layer l only (pre-softmax −∞ on
        (i, j), every head of layer l, or only ``head``; row i renormalises over its other edges), nan where
        the edge does not exist (j after i on a decoder) or is row i's only edge

A per-layer map of layer l (``norm``, ``attn_res_ln``, ``ff_res`` …) claims to say how much token j's vector
enters token i's at layer l; whole-network knockout (:func:`normviz.attribution.knockout.knockout`) cuts j's
routes in every layer at once and is scored against the last layer's row only. This cuts exactly one edge in one
layer, so layer l's map can be scored against what *that layer's* mixing does for the prediction. Each edge is
one copy of a batched pass (:mod:`normviz.attribution.intervene`), L·n² copies in all (n(n + 1)/2 per layer on a
decoder), refused over the knockout family's budget (``knockout_budget_s``) for that many passes; ``rows=[i]``
cuts only the edges into the prediction's row (L·i copies).

:func:`normviz.trust.attributions.explain_text` (``layers=True``) scores each per-layer map this way: layer l's row
i against ``layer_knockout(rows=[i])[l, i]``, Spearman over the source tokens, averaged over the layers
(``spearman_layers``).
"""

from __future__ import annotations

import numpy as np
import torch

from ..attribution import intervene
from ..attribution.knockout import InterventionTarget
from ..core.errors import NormvizError


def edges(n: int, causal: bool) -> list[tuple[int, int]]:
    """(i, j) pairs with an edge to cut: j ≤ i on a decoder (all j on an encoder), row i keeping another."""
    out = []
    for i in range(n):
        sources = range(i + 1) if causal else range(n)
        if len(sources) < 2:
            continue
        out += [(i, j) for j in sources]
    return out


def layer_knockout(
    session,
    token=None,
    foil=None,
    position: int = -1,
    layers=None,
    head: int | None = None,
    target: InterventionTarget | None = None,
    rows=None,
) -> np.ndarray:
    """``rows``: cut only the edges into these rows i (None: every row); the others stay nan."""
    t = target or InterventionTarget(session, token, foil, position)
    lm = t.lm
    L, n = lm.n_layers, len(t.encoded.ids)
    layers = list(range(L)) if layers is None else [int(x) for x in layers]
    if any(not 0 <= x < L for x in layers):
        raise NormvizError(f"layers must lie in 0 … {L - 1}, got {layers}.")
    if head is not None and not 0 <= head < lm.n_heads:
        raise NormvizError(f"head must lie in 0 … {lm.n_heads - 1}, got {head}.")
    pairs = edges(n, bool(lm.spec.causal))
    if rows is not None:
        keep_rows = {int(r) % n for r in rows}
        pairs = [(i, j) for i, j in pairs if i in keep_rows]
    from ..methods import knockout as family
    from ..methods.base import refuse_over_budget

    request = session.request
    refuse_over_budget(
        request,
        "knockout",
        dict(session.options),
        family.FAMILY.budget,
        (len(pairs) * len(layers) + 1) * family.forward_flops(request),
    )
    delta = np.full((L, n, n), np.nan)
    jobs = [(l, i, j) for l in layers for (i, j) in pairs]
    for start, stop in intervene.chunks(len(jobs), n, t.batch_tokens):
        B = stop - start
        edits = intervene.Edits()
        for b, (l, i, j) in enumerate(jobs[start:stop]):
            if l not in edits.masks:
                edits.masks[l] = torch.zeros(
                    (B, lm.n_heads if head is not None else 1, n, n), dtype=lm.dtype, device=lm.device
                )
            if head is None:
                edits.masks[l][b, 0, i, j] = float("-inf")
            else:
                edits.masks[l][b, head, i, j] = float("-inf")
        got = t.deltas(edits, B)
        for b, (l, i, j) in enumerate(jobs[start:stop]):
            delta[l, i, j] = got[b]
    return delta
