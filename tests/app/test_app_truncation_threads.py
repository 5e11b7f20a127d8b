"""Issue 42 (hostile visitors): a text's truncation note comes from the values the library returns
(``Encoded.dropped``), not from ``warnings.catch_warnings(record=True)`` in each visitor's script thread -- that is
module-global, so concurrent first visits lost their note or got another visitor's ("154 tokens" shown for a
157-token text), cached with the session for every later visitor. Eight first visits at once, each a different
length over the cap: every note names its own text's length, the same as one visit alone."""

from __future__ import annotations

import threading

import normviz
from normviz.ui.kit import fetch

CAP = 12


def test_concurrent_first_visits_each_get_their_own_truncation_note():
    lm = normviz.load("minilm")
    texts = [" ".join(["word"] * (CAP + 3 + k)) + "." for k in range(8)]
    alone = [fetch.prepared(lm, t, "", "", CAP, {})[1] for t in texts]
    lengths = [len(lm.tokenizer(t)["input_ids"]) for t in texts]
    for notes, n in zip(alone, lengths):
        assert len(notes) == 1 and f"is {n} tokens long" in notes[0] and f"{n - CAP} tokens were dropped" in notes[0]
    got, start = [None] * len(texts), threading.Barrier(len(texts))

    def visit(i):
        start.wait()
        got[i] = fetch.prepared(lm, texts[i], "", "", CAP, {})[1]

    threads = [threading.Thread(target=visit, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert got == alone
    short = fetch.prepared(lm, "A short text.", "", "", CAP, {})[1]
    assert short == []
