"""Issue 41: the planted-circuit benchmark (scripts/train_planted.py, InterpBench-style) is real. The circuit was
planted by training — previous-token head L0.H1 → induction head L1.H2 in a 2-layer, 4-head model — and this test
checks it by intervention on the shipped weights (never trains): zero-ablating the 2 circuit heads removes ≥ 50 % of
the mean logit difference over the examples, while 2 other heads drawn at random (seeded; 6 heads to draw from, so
the draws differ) remove ≤ 25 %, every draw. It also checks that the decoy heads are not dead: the model's own
attention shows the roles where the benchmark says they are, and the other heads matter for the other task."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from normviz import circuits

NAME = "planted_induction"
pytestmark = pytest.mark.skipif(NAME not in circuits.names(), reason="planted benchmark not shipped")


@pytest.fixture(scope="module")
def bench():
    return circuits.load(NAME)


def test_the_planted_circuit_is_what_the_script_says(bench):
    assert bench.circuit == {(0, 1), (1, 2)}
    assert bench.roles == {"previous token": [(0, 1)], "induction": [(1, 2)]}
    assert bench.edges == {((0, 1), (1, 2))}
    assert (bench.lm.n_layers, bench.lm.n_heads) == (2, 4) and len(bench.examples) >= 24


def test_ablating_the_circuit_removes_the_logit_difference_and_other_heads_do_not(bench):
    got = circuits.check(bench, draws=20, seed=0)
    assert got.total > 1.0, got.text()
    assert got.circuit_removed >= 0.5, got.text()
    assert got.random_removed.max() <= 0.25, got.text()


def test_every_pair_of_other_heads_removes_little(bench):
    """Stronger than random draws: all 15 pairs of the 6 heads outside the circuit, and each circuit head alone."""
    others = [h for h in bench.heads if h not in bench.circuit]
    pairs = [list(p) for p in itertools.combinations(others, 2)]
    got = circuits.ablated(bench.lm, bench.examples, pairs + [[(0, 1)], [(1, 2)]]).mean(0)
    removed = (got[0] - got[1:]) / got[0]
    assert removed[: len(pairs)].max() <= 0.25, removed
    assert removed[len(pairs) :].min() >= 0.3, removed  # each circuit head alone is necessary


def test_the_roles_show_in_the_attention(bench):
    """On the shipped examples: L0.H1 attends to the previous token over the repeat, L1.H2 from the last token to
    the token after its earlier occurrence; the pattern scores the script recorded agree."""
    lm = bench.lm
    prev, ind = [], []
    for ids, token, _ in bench.examples:
        with torch.no_grad():
            att = lm.model(input_ids=torch.tensor([ids]), output_attentions=True).attentions
        n = len(ids)
        prev.append(float(att[0][0, 1, n - 1, n - 2]))
        earlier = [j for j in range(n - 1) if ids[j] == ids[-1] and ids[j + 1] == token]  # r's own occurrence
        assert earlier
        ind.append(float(att[1][0, 2, n - 1, earlier[-1] + 1]))
    assert np.mean(prev) >= 0.5 and np.mean(ind) >= 0.5, (np.mean(prev), np.mean(ind))
    scores = bench.info["scores"]
    assert scores["previous token"][0][1] >= 0.5 and scores["induction"][1][2] >= 0.5


def marked_examples(bench, count: int = 24, seed: int = 0):
    """The other task, as the script generates it: BOS + syllables with "@" y somewhere, then "=" → y."""
    vocab = bench.lm.tokenizer.get_vocab()
    at, eq = vocab["@"], vocab["="]
    syllables = [i for w, i in vocab.items() if w not in ("@", "=", "<s>")]
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        ids = [0] + [int(x) for x in rng.choice(syllables, 30)]
        where = int(rng.integers(1, 29))
        ids[where] = at
        ids.append(eq)
        y = ids[where + 1]
        foil = int(rng.choice([t for t in ids[1:-1] if t not in (y, at)]))
        out.append((ids, y, foil))
    return out


def test_the_other_heads_run_the_other_task(bench):
    """Double dissociation: on the marked task the 6 heads outside the circuit carry the answer and the circuit's 2
    heads do not — the decoys are busy heads, not dead ones."""
    others = [h for h in bench.heads if h not in bench.circuit]
    got = circuits.ablated(bench.lm, marked_examples(bench), [others, sorted(bench.circuit)])
    assert (got[:, 0] > 0).mean() >= 0.9, got[:, 0]
    total = got[:, 0].mean()
    removed = (total - got[:, 1:].mean(0)) / total
    assert removed[0] >= 0.5 and removed[1] <= 0.25, removed
