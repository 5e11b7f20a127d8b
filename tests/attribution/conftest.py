"""``seq2seq_model(arch)``: a tiny float64 encoder–decoder (tests/helpers/seq2seq.py), cached per session
(``head_model`` is the suite's, tests/conftest.py)."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def seq2seq_model():
    from ..helpers import seq2seq

    cache: dict = {}

    def make(arch):
        if arch not in cache:
            cache[arch] = seq2seq.build(arch)
        return cache[arch]
    return make
