"""How long a heatmap panel takes to build and serialise (what Streamlit sends on every redraw), and how big
its JSON is, against a bare ``go.Heatmap`` of the same matrix built and serialised the same way.

    .venv/bin/python benchmarks/bench_figures.py [--repeats 7]

Measured (machine loaded by other sessions; results/bench_figures.txt): a 128-token heatmap 0.017 s vs
0.005 s bare (3.2×), 0.45 MB of JSON; the lines view 0.22 s. Earlier on this branch, per-cell hover
strings and plotly's update calls made it ~1 s and 2.5 MB (main's heatmap: ~0.6 s, 0.76 MB, one run).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import plotly.graph_objects as go

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.timing import alternate  # noqa: E402
from normviz import viz  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print("n    bare s   heatmap s  ratio  bare MB  heatmap MB  lines s")
    for n in (16, 64, 128):
        m = np.tril(np.random.default_rng(0).random((n, n)))
        labels = viz.labels.unique_labels([f"w{i % 40}" for i in range(n)])
        runs = {
            "bare": lambda: go.Figure(go.Heatmap(z=m)).to_json(),
            "heatmap": lambda: viz.heatmap(m, labels, causal=True, boundary=n // 2, width=600).to_json(),
            "lines": lambda: viz.lines(m, labels, threshold=0.1).to_json(),
        }
        _, med = alternate(runs, args.repeats)
        size = {k: len(runs[k]()) / 1e6 for k in ("bare", "heatmap")}
        print(
            f"{n:<4} {med['bare']:.4f}   {med['heatmap']:.4f}     {med['heatmap'] / med['bare']:5.1f}  "
            f"{size['bare']:.3f}    {size['heatmap']:.3f}       {med['lines']:.4f}"
        )


if __name__ == "__main__":
    main()
