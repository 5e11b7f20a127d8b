"""Issue 29: normviz.methods.sinks.first_token_shares, one layer at a time, equals the Why page's former formula on
the whole [L, H, n, n] attention and norm maps (float64 tiny models, α recorded and recomputed from q, k in
blocks of rows), and never builds an [L, H, n, n] array."""

from __future__ import annotations

import numpy as np
import pytest

from normviz.methods import sinks
from normviz.session.session import Session

from ..helpers import tiny


def _old_formula(attention, norm):
    """The Why page's sinks before issue 29 (ui.why.first_token_shares on whole float64 copies)."""

    def share(m):
        m = np.abs(np.asarray(m, dtype=np.float64))
        tot = m.sum(-1)
        return np.where(tot > 0, m[..., 0] / np.where(tot > 0, tot, 1), 0).mean(-1)

    return share(attention), share(norm)


@pytest.mark.parametrize("arch", ["llama", "gpt2", "qwen2", "mistral", "bert"])
@pytest.mark.parametrize("mode", ["weights", "qk"])
def test_per_layer_shares_equal_the_whole_map_formula(tiny_model, arch, mode):
    lm = tiny_model(arch)
    s = Session.from_encoded(lm, [tiny.encoded(13)], options={"record_attention": mode})[0]
    assert (s.records()[0].attn is None) == (mode == "qk")
    ref = Session.from_encoded(lm, [tiny.encoded(13)])[0].get(["attention", "norm"])
    want_a, want_n = _old_formula(ref["attention"], ref["norm"])
    # tiny blocks: several row blocks per layer on the recomputed path
    got_a, got_n = sinks.first_token_shares(s, block_bytes=256)
    assert got_a.shape == got_n.shape == (lm.n_layers, lm.n_heads)
    np.testing.assert_allclose(got_a, want_a, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(got_n, want_n, rtol=1e-12, atol=1e-15)
    assert not (got_a == got_n).all()  # the two shares differ: the vector norms weigh in


def test_no_whole_array_is_built(tiny_model, monkeypatch):
    """The shares come from the layers' records, never from a whole map (Session.get / maps are not called),
    and a long input's α is seen in blocks of rows within ``block_bytes``, never [H, n, n] at once."""
    lm = tiny_model("llama")
    n = 400
    s = Session.from_encoded(lm, [tiny.encoded(n)], options={"record_attention": "qk"})[0]
    s.records()
    for name in ("get", "maps", "map"):
        monkeypatch.setattr(Session, name, lambda *a, **k: pytest.fail("a whole-map path was used"))
    seen = []
    real = sinks._row_shares
    monkeypatch.setattr(sinks, "_row_shares", lambda first, total: seen.append(total.numel()) or real(first, total))
    block = 1 << 18  # 256 KB of float64 α: 20 rows of 4 heads × 400 columns
    sinks.first_token_shares(s, block_bytes=block)
    assert seen and max(seen) * n * 8 <= block < lm.n_heads * n * n * 8
    assert sum(seen) == 2 * lm.n_layers * lm.n_heads * n  # every row of every head, twice (α and ‖αf‖)
