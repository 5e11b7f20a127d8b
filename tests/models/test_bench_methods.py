"""The methods benchmark runs and reports every asked method relative to the forward pass."""
from __future__ import annotations

import importlib.util
from pathlib import Path


def test_bench_methods_smoke(capsys):
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_methods.py"
    spec = importlib.util.spec_from_file_location("bench_methods", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--tokens", "8", "--repeat", "1", "--markdown",
                       "--methods", "attention", "alti", "rollout_attention", "rollout_alti", "flow"]) == 0
    out = capsys.readouterr().out
    for name in ("forward pass", "alti", "rollout_attention", "rollout_alti", "flow"):
        assert f"| {name} |" in out
