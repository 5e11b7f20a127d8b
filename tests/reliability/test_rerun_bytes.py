"""What one rerun sends to the browser, through a real server and raw websocket visitor (``-m slow``): an Explore
layer change at 12 tokens ≤ 0.3 MB on both embedded models; an Overview zoom click reruns only its fragment
(≤ 0.5 MB, the grids beside it are not sent again: they were 18.6 MB a click on smollm2)."""

from __future__ import annotations

import sys
import urllib.parse
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
TWELVE = "The old teacher saw a small bird near the river."  # 12 tokens with minilm's [CLS]/[SEP]


def test_explore_reruns_and_overview_zoom_clicks_stay_small():
    from ws_visitor import Visitor

    from tests.helpers.browser import streamlit_server

    with streamlit_server({"NORMVIZ_PUBLIC": "1"}) as url:
        for model in ("minilm", "smollm2"):
            v = Visitor(url)
            first = v.open(urllib.parse.urlencode({"model": model, "text": TWELVE}))
            assert first.exceptions == 0 and len(first.charts) >= 4, first.alerts
            runs = [v.set_widget("w_layer", double_array_value=[float(x)]) for x in (1, 4, 2)]
            v.close()
            print(model, "Explore layer change bytes:", [r.bytes for r in runs])
            assert all(r.exceptions == 0 and len(r.charts) >= 4 for r in runs)
            assert max(r.bytes for r in runs) <= 300_000
        v = Visitor(url)
        long_text = " ".join(["the quiet river ran under the old stone bridge near the town"] * 12)
        grids = v.open(urllib.parse.urlencode({"model": "minilm", "text": long_text}), page="Overview")
        assert grids.exceptions == 0 and len(grids.charts) >= 2
        zooms = [v.set_widget("w_ov_layer", int_value=x) for x in (3, 1)] + [v.set_widget("w_ov_head", int_value=5)]
        v.close()
        print("Overview: first run", grids.bytes, "bytes; zoom clicks", [z.bytes for z in zooms])
        for z in zooms:
            assert z.status == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY" and len(z.charts) == 1 and z.exceptions == 0
            assert z.bytes <= 500_000
