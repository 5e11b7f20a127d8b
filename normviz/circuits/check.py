"""Is a benchmark's circuit real? Ablate its heads all at once and compare with as many other heads.

ablated(lm, examples, sets, means=None)   [E, 1 + S]: each example's logit difference unchanged (column 0)
                                          and with each set of heads ablated at once (zero, or ``means``
                                          [L, H, d_head]: mean ablation), one batched pass per example
check(bench, draws=20, seed=0)            a :class:`CircuitCheck`: the share of the mean logit difference
                                          removed by the circuit and by ``draws`` random sets of as many
                                          heads outside it
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..attribution import intervene
from ..attribution.readout import readout_of
from .bench import Benchmark, Head, encoded


def ablated(lm, examples, sets: list[list[Head]], means=None) -> np.ndarray:
    readout = readout_of(lm)
    H = lm.n_heads
    layer_of = intervene.layer_index(lm)
    out = np.empty((len(examples), 1 + len(sets)))
    m = None if means is None else torch.as_tensor(np.asarray(means))
    for e, (ids, token, foil) in enumerate(examples):
        enc = encoded(lm, ids)
        B = 1 + len(sets)
        edits = intervene.Edits(layer_of=layer_of)
        for b, heads in enumerate(sets, start=1):
            for layer, head in heads:
                if layer not in edits.keep:
                    edits.keep[layer] = torch.ones((B, H), dtype=lm.dtype, device=lm.device)
                    if m is not None:
                        edits.fill[layer] = torch.zeros((B, H, m.shape[2]), dtype=lm.dtype, device=lm.device)
                edits.keep[layer][b, head] = 0.0
                if m is not None:
                    edits.fill[layer][b, head] = m[layer, head].to(lm.dtype)
        states = intervene.final_states(lm, enc, len(ids) - 1, edits, B)
        out[e] = intervene.scores(readout, states, token, foil).cpu().numpy()
    return out


@dataclass
class CircuitCheck:
    total: float  # the mean logit difference, unchanged
    circuit_removed: float  # share of it removed with the circuit ablated
    random_removed: np.ndarray  # [draws] the same for random sets of as many heads outside the circuit
    size: int

    def text(self) -> str:
        r = self.random_removed
        return (
            f"mean logit difference {self.total:.3f}; ablating the circuit's {self.size} heads removes "
            f"{100 * self.circuit_removed:.1f} %; as many other heads remove {100 * r.mean():.1f} % on average "
            f"(max {100 * r.max():.1f} % over {r.size} draws)"
        )


def check(bench: Benchmark, draws: int = 20, seed: int = 0, means=None) -> CircuitCheck:
    circuit = sorted(bench.circuit)
    others = [h for h in bench.heads if h not in bench.circuit]
    rng = np.random.default_rng(seed)
    k = min(len(circuit), len(others))
    picks = [[others[j] for j in sorted(rng.choice(len(others), k, replace=False))] for _ in range(draws)]
    got = ablated(bench.lm, bench.examples, [circuit] + picks, means).mean(0)
    total = float(got[0])
    removed = (total - got[1:]) / total
    return CircuitCheck(total=total, circuit_removed=float(removed[0]), random_removed=removed[1:], size=len(circuit))
