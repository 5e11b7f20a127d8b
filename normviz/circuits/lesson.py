"""The Learn lesson "find the induction circuit": on the shipped ``induction`` benchmark, the induction head's score
of the query (the last token) → the key (the token after the query's earlier occurrence) split exactly by
:func:`normviz.attribution.qk.attend`, read on the key side (K-composition): which earlier component's output, at
which token, wrote the part of the key's state that makes the score high.

The answer the lesson expects, and shows when the model does it: the previous-token heads of layer 0 (their output
at the key position carries the token before it, i.e. the query's earlier occurrence) write most of the key side,
and by source token the key side comes from that earlier occurrence. Nothing here is drawn; the view draws it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core.errors import NormvizError
from .bench import encoded, load


@dataclass
class KComposition:
    """One induction head's score split, read on the key side.

    labels          the example's token labels
    query, key      positions: the last token, and the token after its earlier occurrence
    earlier         the earlier occurrence of the query's token (key − 1)
    layer, head     the induction head
    total           its score s_{query,key} (= key_side.sum() = key_tokens.sum()), model_score the model's own
    components      names of what wrote the residual stream (embedding, L0.H0 … L0.FF, constant)
    key_side        [C]: each component's part of the score through the key's state (summed over the query side)
    key_tokens      [n + 1]: each source token's part through the key's state, the biases last
    attention       [n]: the head's attention row of the query (where it really looks)
    scores          [n]: the head's score of the query against every key j ≤ query (model's q, k; −inf after)
    previous_token  the benchmark's previous-token heads; ``previous_share`` their part of the key side / total
    """

    labels: list[str]
    query: int
    key: int
    earlier: int
    layer: int
    head: int
    total: float
    model_score: float
    components: list[str]
    key_side: np.ndarray
    key_tokens: np.ndarray
    attention: np.ndarray
    scores: np.ndarray
    previous_token: list[tuple[int, int]]

    @property
    def previous_share(self) -> float:
        names = {f"L{l}.H{h}" for l, h in self.previous_token}
        part = sum(v for c, v in zip(self.components, self.key_side) if c in names)
        return float(part / self.total)

    def ranked(self, k: int = 6) -> list[tuple[str, float]]:
        """The k largest key-side parts as (component, value), largest first."""
        order = np.argsort(-self.key_side)[:k]
        return [(self.components[i], float(self.key_side[i])) for i in order]


def k_composition(example: int = 0, head: int | None = None, bench=None) -> KComposition:
    """The lesson's numbers on example ``example`` of the induction benchmark (its first induction head unless
    ``head``, a head of the induction layer)."""
    from ..session.session import Session

    bench = bench if bench is not None else load("induction")
    if not 0 <= example < len(bench.examples):
        raise NormvizError(f"example must be in [0, {len(bench.examples)}), not {example!r}.")
    induction = bench.roles.get("induction") or []
    if not induction:
        raise NormvizError(f"benchmark {bench.name!r} names no induction heads.")
    layer = induction[0][0]
    head = induction[0][1] if head is None else int(head)
    if (layer, head) not in induction:
        raise NormvizError(
            f"L{layer}.H{head} is not one of the induction heads ({', '.join(f'L{l}.H{h}' for l, h in induction)})."
        )
    ids = bench.examples[example][0]
    q = len(ids) - 1
    earlier = [j for j in range(q) if ids[j] == ids[q]]
    if not earlier:
        raise NormvizError("the example's last token does not occur earlier: nothing to induce from.")
    key = earlier[-1] + 1
    session = Session.from_encoded(bench.lm, [encoded(bench.lm, ids)])[0]
    a = session.attend(layer, head, q, key, by_token=True)
    attention = np.asarray(session.get(["attention"]).map("attention", layer, head)[q], dtype=np.float64)
    scores = np.full(len(ids), -np.inf)
    for j in range(q + 1):  # the head's own q·k for every key (cheap: 24 tokens)
        scores[j] = session.attend(layer, head, q, j).model_score
    return KComposition(
        labels=list(session.encoded.labels),
        query=q,
        key=key,
        earlier=earlier[-1],
        layer=layer,
        head=head,
        total=a.total,
        model_score=a.model_score,
        components=list(a.components),
        key_side=a.by_component.sum(axis=0),
        key_tokens=a.by_token_full.sum(axis=0),
        attention=attention,
        scores=scores,
        previous_token=list(bench.roles.get("previous token") or []),
    )


__all__ = ["KComposition", "k_composition"]
