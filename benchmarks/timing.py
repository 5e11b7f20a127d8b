"""Shared timing helper of the benchmarks: configurations alternated in one process, so that each sees the
same state of this shared machine (its speed drifts by ±20 % from minute to minute)."""

from __future__ import annotations

import statistics
import time


def alternate(runs: dict, repeats: int) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Each callable of ``runs`` once to warm up (first-call costs, allocator), then all of them in turn
    ``repeats`` times; returns (wall times per name, their medians)."""
    times = {c: [] for c in runs}
    for run in runs.values():
        run()
    for _ in range(repeats):
        for c, run in runs.items():
            t0 = time.perf_counter()
            run()
            times[c].append(time.perf_counter() - t0)
    return times, {c: statistics.median(v) for c, v in times.items()}
