"""Issue 42: ``Session.attend`` and ``normviz.graph`` refuse what they used to coerce or run without limit —
``by_token="no"`` computed by_token, ``top_pairs(k=-3)`` gave all but 3, ``top_pairs(by="bogus")`` read as
"token", ``graph(node_threshold=True)`` was taken as 1.0; both ran at any length with no memory budget (+2.2 GB
at 1,024 tokens, ~2.6 GB per 1,000 tokens); ``attend`` on bf16/fp16 raised a raw dtype RuntimeError."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import normviz
from normviz.attribution import graph as graph_mod
from normviz.attribution import qk
from normviz.attribution.graph import graph, graph_bytes
from normviz.core.errors import NormvizError, TooCostlyError

from ..helpers import tiny


def _session(lm, n=9, seed=1, options=None):
    return normviz.Session.from_encoded(lm, [tiny.encoded(n=n, seed=seed)], options=options)[0]


@pytest.fixture(scope="module")
def llama(head_model):
    return _session(head_model("llama"))


@pytest.mark.parametrize("value", ["no", "yes", 0, 1, None, 1.0])
def test_attend_by_token_must_be_a_bool(llama, value):
    with pytest.raises(NormvizError, match="by_token must be True or False"):
        llama.attend(1, 0, query=-1, key=2, by_token=value)


def test_attend_by_token_bool_still_works(llama):
    assert llama.attend(1, 0, query=-1, key=2, by_token=np.bool_(False)).by_token_full is None
    assert llama.attend(1, 0, query=-1, key=2, by_token=True).by_token_full is not None


@pytest.mark.parametrize("k", [-3, 0, True, 2.5, "3"])
def test_top_pairs_refuses_k_that_is_not_a_count(llama, k):
    a = llama.attend(1, 0, query=-1, key=2, by_token=True)
    with pytest.raises(NormvizError, match="k must be a whole number"):
        a.top_pairs(k=k)


def test_top_pairs_refuses_an_unknown_by_and_keeps_k(llama):
    a = llama.attend(1, 0, query=-1, key=2, by_token=True)
    with pytest.raises(NormvizError, match='"component" or "token"'):
        a.top_pairs(3, by="bogus")
    for by in ("component", "token"):
        got = a.top_pairs(3, by=by)
        assert len(got) == 3 and abs(got[0][2]) >= abs(got[-1][2])


@pytest.mark.parametrize(
    "kw",
    [
        {"node_threshold": True},
        {"edge_threshold": False},
        {"node_threshold": np.bool_(True)},
        {"node_threshold": "0.5"},
    ],
)
def test_graph_refuses_thresholds_that_are_not_numbers_before_building(llama, kw, monkeypatch):
    monkeypatch.setattr(graph_mod, "_build", lambda *a, **k: pytest.fail("built"))
    with pytest.raises(NormvizError, match="must be a number in"):
        graph(llama, **kw)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
def test_attend_on_half_precision_models_computes_in_float32(dtype):
    """The half model's layer runs as a float32 copy: the same split as the float32 twin holding the very same
    weights, up to the half-precision recording's rounding (measured: bf16 ≤ 0.8 %, fp16 ≤ 0.7 % of |total|)."""
    lm = tiny.build_with_head("llama", dtype=dtype)
    twin = normviz.from_model(copy.deepcopy(lm.head_model).float(), None, name="twin")
    enc = tiny.encoded(n=9, seed=4)
    s, t = (normviz.Session.from_encoded(m, [enc])[0] for m in (lm, twin))
    tol = 3e-2 if dtype == torch.bfloat16 else 1.5e-2
    for layer, head, key in ((0, 0, 3), (1, 1, 2)):
        a, b = (
            s.attend(layer, head, query=-1, key=key, by_token=True),
            t.attend(layer, head, query=-1, key=key, by_token=True),
        )
        scale = max(1.0, abs(b.total))
        assert abs(a.total - b.total) <= tol * scale
        assert abs(a.by_component.sum() - a.total) <= 1e-5 * scale
        assert np.abs(a.by_component - b.by_component).max() <= tol * scale
        assert abs(a.by_token_full.sum() - a.total) <= tol * scale


def test_attend_over_the_memory_budget_is_refused_before_any_work(head_model, monkeypatch):
    lm = head_model("llama")
    n = 40
    d = lm.sizes[0]
    need = qk.attend_bytes(n, d, lm.n_heads, 1, True, 8)
    s = _session(lm, n=n, options={"memory_budget_mb": need / 2**20 * 0.9})
    monkeypatch.setattr(qk, "components", lambda *a, **k: pytest.fail("computed"))
    with pytest.raises(TooCostlyError, match="memory_budget_mb") as err:
        s.attend(1, 0, query=-1, key=0, by_token=True)
    assert "NORMVIZ_MEMORY_BUDGET_MB" in str(err.value) and "tokens fit" in str(err.value)
    assert "Without by_token" in str(err.value)
    monkeypatch.undo()
    # without by_token it fits: computed
    assert qk.attend_bytes(n, d, lm.n_heads, 1, False, 8) < need * 0.9
    assert np.isfinite(s.attend(1, 0, query=-1, key=0).total)


def test_attend_bytes_matches_the_measured_growth():
    """smollm2 (d = 576, 9 heads, float32) at the last layer and 1,024 tokens (benchmarks/bench_attend_memory.py,
    fresh processes): +1.80 GB peak before, +0.85 GB now (one buffer of component states, calls near 128 MB); the
    estimate, 1.31 GB, is above what was measured and below what it was."""
    got = qk.attend_bytes(1024, 576, 9, 29, False, 4)
    assert 0.85 * 2**30 <= got <= 1.80 * 2**30
    assert qk.chunk_rows(1024, 576, 4) < qk.CHUNK_ROWS and qk.chunk_rows(9, 576, 4) == qk.CHUNK_ROWS


def test_graph_over_the_memory_budget_is_refused_before_building(head_model, monkeypatch):
    lm = head_model("llama")
    n = 30
    d, d_ff = lm.sizes
    need = graph_bytes(n, lm.n_layers, lm.n_heads, d, d_ff, 8)
    s = _session(lm, n=n, options={"memory_budget_mb": need / 2**20 * 0.9})
    monkeypatch.setattr(graph_mod, "_build", lambda *a, **k: pytest.fail("built"))
    with pytest.raises(TooCostlyError, match="memory_budget_mb") as err:
        graph(s)
    fits = int(str(err.value).split("about ")[-1].split(" tokens")[0])
    assert 0 < fits < n
    monkeypatch.undo()
    assert np.isfinite(graph(_session(lm, n=n, options={"memory_budget_mb": need / 2**20 * 1.1})).total)


def test_graph_bytes_is_the_measured_rate_on_smollm2():
    """~2.6 GB per 1,000 tokens measured (explain --graph: 3.8 GB at 1,024, 6.4 GB at 2,048): the estimate is not
    below it, and not far above."""
    per_1000 = (graph_bytes(2048, 30, 9, 576, 1536, 4) - graph_bytes(1024, 30, 9, 576, 1536, 4)) / 1.024
    assert 2.6e9 <= per_1000 <= 3.3e9
