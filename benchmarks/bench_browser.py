"""What a visitor waits for in a real browser (headless Chromium): a layer change, a head change, a map
toggle and a new short sentence on Explore, against the floor of Streamlit itself (a bare page with a slider
and four plotly heatmaps, benchmarks/apps/bare_slider.py), measured in the same run.

    .venv/bin/python benchmarks/bench_browser.py [--rounds 5] [--json OUT.json]

Browser time: from the key press / click (after the control has the focus, or the option is typed) until
every panel shows the new state (``shown``; layer and head changes are drawn in the browser from frames
first) and until Streamlit is idle too (the rerun drawn).
Server time: app.py's own run time (NORMVIZ_TIMING=1). On a loaded machine read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.browser import chromium, streamlit_server  # noqa: E402,E501
from tools.browser import measure_explore as _measure
from tools.browser import streamlit_floor as floor


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="normviz-bench-browser-"))
    log = str(tmp / "streamlit.log")
    with (
        streamlit_server(script="benchmarks/apps/bare_slider.py", log_path=str(tmp / "bare.log")) as bare,
        streamlit_server(env={"NORMVIZ_TIMING": "1"}, log_path=log) as url,
        chromium(1280, 800) as driver,
    ):
        base = floor(driver, bare, args.rounds)
        figures = _measure(driver, url, log, args.rounds)
        base_after = floor(driver, bare, args.rounds)
    out = {"streamlit_floor_s": round(statistics.mean([base, base_after]), 3), **figures}
    for k, v in figures.items():
        if isinstance(v, dict):
            v["shown_x_floor"] = round(v["shown_median_s"] / max(1e-9, out["streamlit_floor_s"]), 2)
            v["x_floor"] = round(v["median_s"] / max(1e-9, out["streamlit_floor_s"]), 2)
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
