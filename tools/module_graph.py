"""The import graph of the ``normviz`` package, read from its source (nothing is imported).

Every ``import`` / ``from … import`` counts, at module level or inside a function (lazy imports), and so do
``importlib.import_module("normviz.…")`` calls — with a literal, or with a name bound to a tuple/list of
literals in the same function (``for mod in ("normviz.corpus.cli", …): importlib.import_module(mod)``).
``TYPE_CHECKING`` blocks are left out (type hints only: never executed).

A node is a module: ``normviz.session.schedule``, ``normviz.methods.base``; a package is its ``__init__``
(``normviz.methods``). ``from .methods import all_keys`` is an edge to ``normviz.methods``;
``from . import decompx`` inside ``normviz.methods`` an edge to ``normviz.methods.decompx``.

    python -m tools.module_graph [ROOT]     # figures: modules, edges, cycles, files per package

Used by ``tests/unit/test_layers.py`` (no cycle, no import from a lower layer to a higher one) and by
``benchmarks/module_graph.py`` (the figures of the README).
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "normviz"


@dataclass
class Graph:
    modules: dict[str, Path]  # module name -> file
    edges: dict[str, dict[str, int]] = field(default_factory=dict)  # importer -> {imported: line}

    def edge_list(self) -> list[tuple[str, str, int]]:
        return [(a, b, line) for a, bs in self.edges.items() for b, line in bs.items()]


def module_name(root: Path, path: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _is_package(modules: dict[str, Path], name: str) -> bool:
    return name in modules and modules[name].name == "__init__.py"


def _resolve(modules: dict[str, Path], importer: str, module: str | None, level: int) -> str | None:
    if level:
        base = importer.split(".")
        if not _is_package(modules, importer):
            base = base[:-1]
        base = base[: len(base) - (level - 1)]
        target = ".".join(base + ([module] if module else []))
    else:
        target = module or ""
    return target


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _literals(node) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


class _Visitor(ast.NodeVisitor):
    def __init__(self, modules: dict[str, Path], name: str):
        self.modules, self.name = modules, name
        self.found: dict[str, int] = {}
        self.bound: dict[str, list[str]] = {}  # names bound to string literals (for importlib.import_module(name))

    def add(self, target: str | None, line: int) -> None:
        if not target or not (target == PACKAGE or target.startswith(PACKAGE + ".")):
            return
        while target not in self.modules and "." in target:  # an attribute of a module: the module
            target = target.rsplit(".", 1)[0]
        if target in self.modules and target != self.name:
            self.found.setdefault(target, line)

    def visit_If(self, node: ast.If) -> None:
        if _type_checking(node):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = _resolve(self.modules, self.name, node.module, node.level)
        for alias in node.names:
            sub = f"{base}.{alias.name}" if base else alias.name
            self.add(sub if sub in self.modules else base, node.lineno)

    def visit_Assign(self, node: ast.Assign) -> None:
        lits = _literals(node.value)
        if lits:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    self.bound[t.id] = lits
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        lits = _literals(node.iter) or (self.bound.get(node.iter.id, []) if isinstance(node.iter, ast.Name) else [])
        if lits and isinstance(node.target, ast.Name):
            self.bound[node.target.id] = lits
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if name in ("import_module", "__import__") and node.args:
            arg = node.args[0]
            lits = _literals(arg) or (self.bound.get(arg.id, []) if isinstance(arg, ast.Name) else [])
            for lit in lits:
                package = None
                if lit.startswith(".") and len(node.args) > 1:
                    package = _literals(node.args[1])[0] if _literals(node.args[1]) else None
                if package:
                    level = len(lit) - len(lit.lstrip("."))
                    self.add(_resolve(self.modules, package, lit.lstrip(".") or None, level), node.lineno)
                else:
                    self.add(lit, node.lineno)
        self.generic_visit(node)


def build(root: Path | str | None = None) -> Graph:
    root = Path(root) if root is not None else Path(__file__).resolve().parents[1] / PACKAGE
    modules = {module_name(root, p): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}
    graph = Graph(modules)
    for name, path in modules.items():
        v = _Visitor(modules, name)
        v.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        graph.edges[name] = v.found
    return graph


def cycles(graph: Graph) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.edges.get(v, {}):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))
    for v in graph.modules:
        if v not in index:
            strong(v)
    return out


def unit_of(graph: Graph, module: str, single: tuple[str, ...] = (), merge=None) -> str:
    """The folder a module belongs to, as one unit: a package's modules and its ``__init__`` are the package
    (``normviz.ui.kit.state`` → ``normviz.ui.kit``); a top-level module (``normviz.__main__``) is its own unit
    (the top folder holds the layers' single files, each placed on its own); ``single``: modules still counted
    on their own (a file on its way to another folder). ``merge(parent, sub)``: True when a subfolder is one
    unit with its parent folder (the layer test: when both sit in the same layer, ``methods.norms`` is part
    of ``methods``); default: every subfolder merged into its top folder (``normviz.methods``)."""
    if module in single or "." not in module:
        return module
    unit = module if graph.modules[module].name == "__init__.py" else module.rsplit(".", 1)[0]
    if unit == PACKAGE:
        return module
    while unit.count(".") > 1:
        parent = unit.rsplit(".", 1)[0]
        if merge is not None and not merge(parent, unit):
            break
        unit = parent
    return unit


def folders(graph: Graph, single: tuple[str, ...] = (), merge=None) -> Graph:
    """The graph with each folder one node (:func:`unit_of`): an edge between two folders for any import
    between their modules (the first line found kept), none within a folder."""
    units = {unit_of(graph, m, single, merge): graph.modules[m] for m in graph.modules}
    out = Graph({u: units[u] for u in units})
    for a, b, line in graph.edge_list():
        ua, ub = unit_of(graph, a, single, merge), unit_of(graph, b, single, merge)
        if ua != ub:
            out.edges.setdefault(ua, {}).setdefault(ub, line)
    for u in units:
        out.edges.setdefault(u, {})
    return out


def layer_of(module: str, layers) -> int:
    """The index of ``module``'s layer in ``layers`` (lowest first; tuples of module or package prefixes, the
    longest prefix wins); -1 when none names it."""
    best, found = -1, -1
    for i, prefixes in enumerate(layers):
        for p in prefixes:
            if (module == p or (p != PACKAGE and module.startswith(p + "."))) and len(p) > best:
                best, found = len(p), i
    return found


def back_edges(graph: Graph, layers) -> list[tuple[str, str, int]]:
    """The imports that run up the layers (the importer's layer below the imported's)."""
    return [(a, b, line) for a, b, line in graph.edge_list() if layer_of(b, layers) > layer_of(a, layers)]


def files_per_package(graph: Graph) -> dict[str, int]:
    """Python files per package (``normviz`` = the top-level modules)."""
    count: Counter = Counter()
    for name, path in graph.modules.items():
        pkg = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        count[pkg] += 1
    return dict(sorted(count.items()))


def figures(graph: Graph, layers=None) -> dict:
    """Modules, edges, cycles (and, given ``layers``, imports up the layers), by module and by folder."""
    cyc = cycles(graph)
    merge = None if layers is None else (lambda parent, sub: layer_of(parent, layers) == layer_of(sub, layers))
    units = folders(graph, merge=merge)
    fcyc = cycles(units)
    out = {
        "modules": len(graph.modules),
        "edges": len(graph.edge_list()),
        "cycles": len(cyc),
        "modules_in_cycles": sum(len(c) for c in cyc),
        "cycle_members": cyc,
        "folders": len(units.modules),
        "folder_edges": len(units.edge_list()),
        "folder_cycles": len(fcyc),
        "folder_cycle_members": fcyc,
        "files_per_package": files_per_package(graph),
    }
    if layers is not None:
        out["back_edges"] = len(back_edges(graph, layers))
        # a folder sits at its lowest module's layer: an import from it to a higher layer runs back up
        low = {}
        for m in graph.modules:
            u = unit_of(graph, m, merge=merge)
            low[u] = min(low.get(u, 10**6), layer_of(m, layers))
        out["folder_back_edges"] = [f"{a} -> {b}" for a, b, _ in units.edge_list() if low[b] > low[a]]
        out["folders_spanning_layers"] = sorted(
            u
            for u in low
            if len({layer_of(m, layers) for m in graph.modules if unit_of(graph, m, merge=merge) == u}) > 1
        )
    return out


def main(argv: list[str] | None = None) -> int:
    import json

    argv = sys.argv[1:] if argv is None else argv
    print(json.dumps(figures(build(argv[0] if argv else None)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
