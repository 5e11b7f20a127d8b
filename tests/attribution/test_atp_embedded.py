"""Issue 41 on smollm2 (float32): AtP equals autograd through hooks on W^O (tests/attribution/test_atp.py's
reference) to ≤ 1e-3 of its range, on the issue's example."""

from __future__ import annotations

import numpy as np

import normviz

from .test_atp import _reference_atp

TEXT, TOKEN, FOIL = "The capital of France is", " Paris", " London"


def test_smollm2_atp_equals_autograd_through_hooks(smollm2):
    s = normviz.Session(smollm2, TEXT)
    a = s.atp(TOKEN, FOIL)
    ref = _reference_atp(smollm2, "llama", s.encoded.ids, len(s.encoded.ids) - 1, a.token, a.foil)
    assert a.delta.shape == (smollm2.n_layers, smollm2.n_heads)
    assert np.abs(a.delta - ref).max() <= 1e-3 * np.ptp(ref), np.abs(a.delta - ref).max()
