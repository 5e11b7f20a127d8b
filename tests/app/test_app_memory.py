"""The server-wide memory budget in the app (issue 29): a request that would pass it is refused with a
message (no traceback), the texts of visitors who left are released, room is made by dropping the least
recently used text of another visitor (AppTest on the embedded minilm)."""

from __future__ import annotations

import pytest

from normviz.ui.kit import stores

from ..helpers.app import app, no_exception


@pytest.fixture
def fresh_budget(monkeypatch):
    def make(mb: str | None = None):
        if mb is None:
            monkeypatch.delenv("NORMVIZ_SERVER_MEMORY_MB", raising=False)
        else:
            monkeypatch.setenv("NORMVIZ_SERVER_MEMORY_MB", mb)
        stores.server_memory.clear()
        stores.session_cache().clear()

    yield make
    stores.server_memory.clear()
    monkeypatch.delenv("NORMVIZ_SERVER_MEMORY_MB", raising=False)


def errors(at) -> list[str]:
    return [e.value.replace("\\", "") for e in at.error]  # shown as plain text: Markdown escaped


def test_a_request_past_the_server_budget_is_refused_with_a_message(fresh_budget):
    fresh_budget("256")  # below what this process already holds (torch, the model)
    at = app(query={"text": "The budget refuses this sentence before it is recorded."})
    at.run()
    no_exception(at)
    shown = " ".join(errors(at))
    assert "memory budget" in shown and "NORMVIZ_SERVER_MEMORY_MB" in shown and "Try again" in shown
    assert not [c for c in at.get("plotly_chart")]  # nothing was computed, nothing drawn
    assert all(s.part.passes == 0 for s, _ in (stores.session_cache().get(k) for k in stores.session_cache().keys()))


def test_a_visitors_text_is_released_when_the_visitor_is_gone(fresh_budget):
    fresh_budget()
    text = "The river rose in the night."
    at = app(query={"text": text})
    at.run()
    no_exception(at)
    cache, mem = stores.session_cache(), stores.server_memory()
    mine = [k for k in cache.keys() if text in k]
    assert len(mine) == 1 and cache.get(mine[0])[0].part.passes == 1
    assert mem.sweep(lambda visitor: True) == 0 and mine[0] in cache  # still connected: kept
    assert mem.sweep(lambda visitor: False) == 1 and mine[0] not in cache  # gone: released
    at.run()  # a visitor coming back gets the text computed again, the same page
    no_exception(at)
    assert not errors(at) and len([k for k in cache.keys() if text in k]) == 1


def test_room_is_made_from_the_least_recently_used_other_text(fresh_budget):
    fresh_budget()
    first, second = "A first visitor's sentence.", "A second visitor's sentence, longer than the first one."
    a = app(query={"text": first})
    a.run()
    no_exception(a)
    cache, mem = stores.session_cache(), stores.server_memory()
    real, workers = mem._rss, mem._workers
    held = real()
    mem._workers = lambda: 0  # this test's process alone (a worker left by another test would count too)
    # the process is now "full": only dropping the first text (worth 500 MB here) makes room for the second
    mem._rss = lambda: held + (500 << 20) * sum(first in k for k in cache.keys())
    mem.limit = held + (500 << 20) + (1 << 20)
    try:
        b = app(query={"text": second})
        b.run()
        no_exception(b)
    finally:
        mem._rss, mem._workers = real, workers
    assert not errors(b) and b.get("plotly_chart")
    assert not [k for k in cache.keys() if first in k] and [k for k in cache.keys() if second in k]
    assert mem.evicted == 1


def test_overview_computes_one_layer_at_a_time_never_the_whole_arrays(fresh_budget):
    fresh_budget()
    text = "Overview draws every layer and head of this sentence."
    at = app("app_pages/1_Overview.py", query={"text": text})
    at.run()
    no_exception(at)
    assert len(at.get("plotly_chart")) >= 3 and not errors(at)  # two grids, the zoom, the no-op scatter
    cache = stores.session_cache()
    (session,) = [cache.get(k)[0] for k in cache.keys() if text in k]
    assert session.computed() == []  # today: attention, norm (and the norm family) as [L, H, n, n]


def test_public_explore_computes_a_long_texts_layer_in_the_worker(fresh_budget, monkeypatch):
    from normviz.ui.kit import server_memory
    from normviz.workers import process as workers

    fresh_budget()
    monkeypatch.setenv("NORMVIZ_PUBLIC", "1")
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "400")
    text = "The river rose in the night and the town woke to water in the streets. " * 20
    needs = []
    admit = server_memory.ServerMemory.admit

    def noted(self, need, session=None, what="this text"):
        needs.append((what, need))
        return admit(self, need, session, what)

    monkeypatch.setattr(server_memory.ServerMemory, "admit", noted)
    try:
        at = app(query={"text": text, "layer": "1"})
        at.session_state["_normviz_width"] = 500
        at.run()
        no_exception(at)
        overviews = [f for f in at.get("plotly_chart") if '"overview"' in f.proto.spec]
        assert len(overviews) == 4 and not errors(at)
        cache = stores.session_cache()
        (session,) = [cache.get(k)[0] for k in cache.keys() if any(isinstance(x, str) and "river rose" in x for x in k)]
        assert session.part.passes == 0  # recorded in the worker, not in the server
        assert [r.family for r in session.worker.ran] == ["long_layer"]
        # the budget counts the worker's memory, so the layer's working set there is reserved while it runs
        layer = [need for what, need in needs if what.startswith("a layer of this")]
        assert layer and min(layer) >= server_memory.LONG_LAYER_BYTES, needs
    finally:
        if workers._SHARED is not None:
            workers._SHARED.shutdown()
