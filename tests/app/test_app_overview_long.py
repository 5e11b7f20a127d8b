"""Overview on a long text sends bounded figures (issue 42: at 4,096 tokens the zoomed head was drawn for all
n × n cells and Streamlit refused the 416.7 MB message outside the page's catch). AppTest on the embedded minilm
at its 512-token window, past ``long_maps.LONG_TOKENS``: the zoom is an overview of at most OVERVIEW_CELLS² blocks,
and every figure the page sends stays under a size that does not grow with n²."""

from __future__ import annotations

import numpy as np
import pytest

from normviz.ui.kit import stores
from normviz.ui.views import long_maps

from ..helpers.app import app, heatmaps, no_exception, z

TEXT = "The river rose in the night and the town woke to water in the streets. " * 40  # > 512 minilm tokens


def _max_message() -> int:
    """The deployment's websocket message limit (.streamlit/config.toml ``server.maxMessageSize``, MB), in bytes:
    a figure past it is refused by Streamlit itself, outside the page's catch."""
    import tomllib

    from ..helpers.app import ROOT

    return int(tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]["maxMessageSize"]) << 20


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "4096")
    stores.server_memory.clear()
    stores.session_cache().clear()
    yield
    stores.server_memory.clear()
    stores.session_cache().clear()


@pytest.mark.parametrize("public", [False, True], ids=["local", "worker"])
def test_a_long_texts_overview_sends_bounded_figures(fresh, monkeypatch, public):
    from normviz.workers import process as workers

    if public:  # the long-text path of the public app: a long text's layer is computed in the worker
        monkeypatch.setenv("NORMVIZ_PUBLIC", "1")
    at = app("app_pages/1_Overview.py", query={"text": TEXT, "model": "minilm", "layer": "2", "head": "3"})
    at.session_state["_normviz_width"] = 1200
    try:
        at.run()
        no_exception(at)
        assert not at.error, [e.value for e in at.error]
        cache = stores.session_cache()
        (session,) = [cache.get(k)[0] for k in cache.keys() if any(isinstance(x, str) and "river rose" in x for x in k)]
        n = session.n_tokens
        assert long_maps.is_long(n) and n == 512, n
        zooms = [f for f in heatmaps(at) if (f["layout"].get("meta") or {}).get("normviz") == "overview"]
        assert len(zooms) == 1, [f["layout"]["title"]["text"] for f in heatmaps(at)]
        zm = z(zooms[0])
        assert zm.size <= long_maps.OVERVIEW_CELLS**2 < n * n, zm.shape
        # the block max of the head's own map: its largest cell is the map's largest (the blocks cover every cell)
        key = at.session_state["w_ov_map"]
        full = np.asarray(session.map(key, 2, 3), np.float64)
        assert full.min() >= 0 and "log" in zooms[0]["layout"]["title"]["text"]
        assert np.nanmax(zm) == pytest.approx(np.log10(full.max()), abs=1e-6)
        assert "not cell for cell" in " ".join(c.value for c in at.caption)
        # the grids hold at most 400,000 cells in all (overview_maps.grid_tokens) whatever n; the zoom ≤ 256²
        sizes = [len(el.proto.spec) for el in at.get("plotly_chart")]
        assert max(sizes) < _max_message() / 2 and sum(sizes) < _max_message(), sizes
        if public:
            assert "long_layer" in [r.family for r in session.worker.ran]
    finally:
        if public and workers._SHARED is not None:
            workers._SHARED.shutdown()


def test_a_short_texts_zoom_is_drawn_cell_for_cell(fresh):
    at = app("app_pages/1_Overview.py", query={"text": "A short sentence stays cell for cell.", "model": "minilm"})
    at.run()
    no_exception(at)
    cache = stores.session_cache()
    (session,) = [cache.get(k)[0] for k in cache.keys() if any(isinstance(x, str) and "cell for cell" in x for x in k)]
    n = session.n_tokens
    zooms = [f for f in heatmaps(at) if z(f).shape == (n, n)]
    assert zooms and not [f for f in heatmaps(at) if (f["layout"].get("meta") or {}).get("normviz") == "overview"]


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_4096_token_overview_through_the_worker_stays_under_the_message_limit(fresh, monkeypatch):
    """The case of issue 42 itself: smollm2 (8,192-token window) at NORMVIZ_MAX_TOKENS=4096 in the public app, its
    long layer computed in the heavy-maps worker. The page drew "MessageSizeError: 416.7 MB exceeds 50 MB" there;
    now every figure is far under the limit and the zoom is block max, not 4,096² cells."""
    from normviz.workers import process as workers

    monkeypatch.setenv("NORMVIZ_PUBLIC", "1")
    long_text = "The river rose in the night and the town woke to water in the streets. " * 320
    at = app("app_pages/1_Overview.py", query={"text": long_text, "model": "smollm2", "layer": "20", "head": "3"})
    at.session_state["_normviz_width"] = 1200
    try:
        at.run(timeout=1500)
        no_exception(at)
        assert not at.error, [e.value for e in at.error]
        cache = stores.session_cache()
        (session,) = [cache.get(k)[0] for k in cache.keys() if any(isinstance(x, str) and "river rose" in x for x in k)]
        assert session.n_tokens == 4096, session.n_tokens
        zooms = [f for f in heatmaps(at) if (f["layout"].get("meta") or {}).get("normviz") == "overview"]
        assert len(zooms) == 1 and z(zooms[0]).size <= long_maps.OVERVIEW_CELLS**2
        sizes = [len(el.proto.spec) for el in at.get("plotly_chart")]
        assert sizes and max(sizes) < _max_message() / 2 and sum(sizes) < _max_message(), sizes
        assert "long_layer" in [r.family for r in session.worker.ran]
    finally:
        if workers._SHARED is not None:
            workers._SHARED.shutdown()
