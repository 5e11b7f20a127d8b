"""The methods benchmark runs and reports every asked map key (in its family's row) relative to the forward pass."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from normviz.methods import registry


def test_bench_methods_smoke(capsys):
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_methods.py"
    spec = importlib.util.spec_from_file_location("bench_methods", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    keys = ["attention", "alti", "rollout_attention", "rollout_alti", "flow"]
    assert bench.main(["--tokens", "8", "--repeat", "1", "--markdown", "--methods", *keys]) == 0
    out = capsys.readouterr().out
    rows = {line.split("|")[1].strip(): line.split("|")[2] for line in out.splitlines() if line.startswith("| ")}
    assert "forward pass" in rows
    for key in keys:
        family = registry.family_of(key).name
        assert family in rows, (key, out)
        assert key in [k.strip() for k in rows[family].split(",")], (key, rows[family])
