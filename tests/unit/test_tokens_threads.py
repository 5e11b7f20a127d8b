"""``core.tokens.encode`` is thread-safe (issue 42): a fast tokenizer's truncation setting is the shared Rust
tokenizer's state, set by a call with ``truncation=True`` and cleared by the next call without. Threads encoding
different texts with different limits at once, on one tokenizer, each get what the same call gives alone (ids,
segment ids, dropped count), for an encoder (minilm: pairs with segment ids) and a decoder (SmolLM2)."""

from __future__ import annotations

import threading
import warnings

import pytest
import transformers as tf

from normviz.core import tokens
from normviz.models.loading import _minilm_dir, smollm2_dir

ROUNDS = 30


def _cases():
    base = "The river rose in the night and the town woke to water in its streets, every one of them. "
    out = []
    for k in range(8):
        text = base * (1 + k % 4) + f"Case {k}."
        pair = ("Was the town dry by morning? " * (1 + k % 3)) if k % 2 else None
        limit = None if k == 0 else 9 + 7 * k  # most cut, one not at all, each at its own limit
        out.append((text, pair, limit))
    return out


@pytest.fixture(scope="module", params=["minilm", "smollm2"])
def tokenizer(request):
    path = _minilm_dir() if request.param == "minilm" else smollm2_dir()
    tok = tf.AutoTokenizer.from_pretrained(str(path))
    assert tok.is_fast
    return tok, request.param == "smollm2"


def _one(tok, decoder, case):
    text, pair, limit = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        e = tokens.encode(tok, text, pair, max_length=limit, warn=False, decoder=decoder)
    return e.ids, e.token_type_ids, e.dropped


def test_threads_encoding_at_once_get_what_each_gets_alone(tokenizer):
    tok, decoder = tokenizer
    cases = _cases()
    alone = [_one(tok, decoder, c) for c in cases]
    assert sum(d > 0 for _, _, d in alone) >= 6  # the limits cut most texts (the truncating call runs)
    for (ids, _, dropped), (_, _, limit) in zip(alone, cases):
        assert limit is None or len(ids) <= limit
    got: dict[int, list] = {i: [] for i in range(len(cases))}
    start = threading.Barrier(len(cases))

    def run(i):
        start.wait()
        for _ in range(ROUNDS):
            got[i].append(_one(tok, decoder, cases[i]))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(cases))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    wrong = {i: sum(r != alone[i] for r in rs) for i, rs in got.items() if any(r != alone[i] for r in rs)}
    assert not wrong, f"{sum(wrong.values())} of {ROUNDS * len(cases)} encodings differed from their serial result"
    assert all(len(rs) == ROUNDS for rs in got.values())


def test_tokenize_holds_the_same_lock_as_encode(tokenizer):
    tok, _ = tokenizer
    lock = tokens.tokenizer_lock(tok)
    assert tokens.tokenizer_lock(tok) is lock
    held = []

    class Probe:  # a tokenizer stand-in: records whether the lock is held while it is called
        def __call__(self, *a, **k):
            held.append(tokens.tokenizer_lock(self)._is_owned())
            return {"input_ids": [1, 2]}

    p = Probe()
    assert tokens.tokenize(p, "x")["input_ids"] == [1, 2] and held == [True]
