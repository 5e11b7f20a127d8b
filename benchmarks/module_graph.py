"""Module-graph figures of normviz (modules, import edges, cycles, files per package), before and after.

    python benchmarks/module_graph.py [BASELINE_ROOT]   # default baseline: /work/wt/baseline (main at fd13ca3)

Reads source only (``tools.module_graph``: lazy and importlib imports counted), so the baseline's
tree needs no environment of its own.
"""
from __future__ import annotations

import sys
from pathlib import Path

import importlib.util

HERE = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("module_graph", HERE / "tools" / "module_graph.py")
_graph = importlib.util.module_from_spec(_spec)  # loaded as a file: importing normviz would need torch
sys.modules["module_graph"] = _graph
_spec.loader.exec_module(_graph)
build, figures = _graph.build, _graph.figures


def row(label: str, root: Path) -> dict:
    f = figures(build(root))
    print(f"{label:>9}: {f['modules']} modules, {f['edges']} import edges, {f['cycles']} cycles "
          f"({f['modules_in_cycles']} modules in them){': ' + str(f['cycle_members']) if f['cycles'] else ''}")
    return f


def main() -> None:
    base = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/wt/baseline") / "normviz"
    before = row("before", base) if base.is_dir() else None
    after = row("after", HERE / "normviz")
    pk = sorted(set(after["files_per_package"]) | set(before["files_per_package"] if before else ()))
    print("files per package (before → after):")
    for p in pk:
        b = before["files_per_package"].get(p, 0) if before else "?"
        print(f"  {p:<24} {b} → {after['files_per_package'].get(p, 0)}")


if __name__ == "__main__":
    main()
