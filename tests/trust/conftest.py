"""``head_model(arch)``: a tiny float64 model with its LM head (tests/helpers/tiny.py), cached per session."""
from __future__ import annotations

import pytest

from ..helpers import tiny


@pytest.fixture(scope="session")
def head_model():
    cache: dict = {}

    def make(arch):
        if arch not in cache:
            cache[arch] = tiny.build_with_head(arch)
        return cache[arch]
    return make
