"""Module-graph figures of normviz, before and after: modules, import edges, imports up the layers, cycles, and
the same counted by folder (each package one unit, :func:`tools.module_graph.folders`; a subfolder in its
parent's layer is part of it), folders whose modules sit in different layers, files per package.

    python benchmarks/module_graph.py [BASELINE_REPO]   # default baseline: /work/wt/baseline

Reads source only (:mod:`tools.module_graph`: lazy and importlib imports counted), so the baseline's tree needs
no environment of its own. Each side's layers are its own ``tests/unit/test_layers.py``'s ``LAYERS``.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("module_graph", HERE / "tools" / "module_graph.py")
_graph = importlib.util.module_from_spec(_spec)  # loaded as a file: importing normviz would need torch
sys.modules["module_graph"] = _graph
_spec.loader.exec_module(_graph)
build, figures = _graph.build, _graph.figures


def layers_of(repo: Path):
    tree = ast.parse((repo / "tests" / "unit" / "test_layers.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "LAYERS" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def row(label: str, repo: Path) -> dict:
    f = figures(build(repo / "normviz"), layers_of(repo))
    print(
        f"{label:>7}: {f['modules']} modules, {f['edges']} import edges, {f.get('back_edges', '?')} up the layers, "
        f"{f['cycles']} cycles | {f['folders']} folders (units), {f['folder_edges']} edges, "
        f"{len(f.get('folder_back_edges', []))} up the layers, {f['folder_cycles']} cycles, "
        f"{len(f.get('folders_spanning_layers', []))} folders spanning layers"
    )
    for k in ("folder_back_edges", "folder_cycle_members", "folders_spanning_layers"):
        if f.get(k):
            print(f"         {k}: {f[k]}")
    return f


def main() -> None:
    base = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/wt/baseline")
    before = row("before", base) if (base / "normviz").is_dir() else None
    after = row("after", HERE)
    pk = sorted(set(after["files_per_package"]) | set(before["files_per_package"] if before else ()))
    print("files per package (before → after):")
    for p in pk:
        b = before["files_per_package"].get(p, 0) if before else "?"
        print(f"  {p:<24} {b} → {after['files_per_package'].get(p, 0)}")


if __name__ == "__main__":
    main()
