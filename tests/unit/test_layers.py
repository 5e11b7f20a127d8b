"""The package's import graph, read from its source (lazy imports inside functions and importlib strings
included, :mod:`tools.module_graph`): no import cycle, and no import from a lower layer to a higher
one. A new module must be placed in LAYERS (longest prefix wins), so its place is a decision, not an accident."""

from __future__ import annotations

from tools import module_graph
from tools.module_graph import build, cycles, folders, unit_of

# lowest first; a module may import modules of its own layer or below. A folder (package) sits in one layer: every
# module in it, so that counted as one unit (tools.module_graph.folders) it imports only its layer or below too
LAYERS = (
    ("normviz.core",),  # errors, settings, tokens, backend, the memory budget …: the floor
    ("normviz.models",),  # loading and the ArchSpec table
    ("normviz.record", "normviz.record.encdec"),  # the one recorded forward pass (encoder–decoders: encdec)
    ("normviz.methods",),  # one module per map family, the registry and the key space
    ("normviz.attribution",),  # prediction attribution: below the Session that calls it
    ("normviz.session",),  # Session and its jobs (schedule, map budget, layer maps)
    ("normviz.corpus", "normviz.align", "normviz.workers", "normviz.trust", "normviz.circuits"),
    ("normviz.viz",),  # plotly figures and normviz.show
    ("normviz",),  # the package's facade: normviz/__init__.py
    ("normviz.cli", "normviz.__main__"),  # one module per subcommand (normviz/cli/)
    ("normviz.ui.kit",),  # what every page is built from
    ("normviz.ui.views",),  # one page's own view, on the kit
    ("normviz.ui",),
)
# modules counted on their own until they move to the folder of their layer (issue 32: the CLI package)
ON_THEIR_WAY: tuple[str, ...] = ()


def layer_of(module: str) -> int:
    found = module_graph.layer_of(module, LAYERS)
    assert found >= 0, f"{module} has no layer: place it in LAYERS"
    return found


GRAPH = build()


def test_every_module_has_a_layer():
    for m in GRAPH.modules:
        layer_of(m)


def test_no_import_cycle():
    assert cycles(GRAPH) == []


def test_no_import_goes_up_the_layers():
    up = [
        f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)}) at line {line}"
        for a, b, line in GRAPH.edge_list()
        if layer_of(b) > layer_of(a)
    ]
    assert up == []


def same_layer(parent: str, sub: str) -> bool:
    """A subfolder is one unit with its parent folder when both sit in the same layer (``methods.norms``)."""
    return layer_of(parent) == layer_of(sub)


FOLDERS = folders(GRAPH, ON_THEIR_WAY, same_layer)


def test_every_folder_sits_in_one_layer():
    spans = {}
    for m in GRAPH.modules:
        spans.setdefault(unit_of(GRAPH, m, ON_THEIR_WAY, same_layer), set()).add(layer_of(m))
    assert {u: sorted(ls) for u, ls in spans.items() if len(ls) > 1} == {}


def test_no_folder_cycle():
    """Each folder one unit: no two folders import each other, however indirectly."""
    assert cycles(FOLDERS) == []


def test_no_folder_imports_up_the_layers():
    up = [
        f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)}), first at line {line}"
        for a, b, line in FOLDERS.edge_list()
        if layer_of(b) > layer_of(a)
    ]
    assert up == []


def test_folders_are_units(tmp_path):
    """The folder graph the tests above read: a package's modules are one node, a top-level module its own,
    an import between two folders' modules is one edge between the folders (a cycle of folders found), and a
    subfolder is its own unit or part of its parent's as ``merge`` says."""
    pkg = tmp_path / "normviz"
    (pkg / "low").mkdir(parents=True)
    (pkg / "high").mkdir()
    for f in ("__init__.py", "low/__init__.py", "high/__init__.py", "top.py"):
        (pkg / f).write_text("")
    (pkg / "low" / "a.py").write_text("from ..high import b\n")
    (pkg / "high" / "b.py").write_text("def f():\n    from normviz.low import c\n")
    (pkg / "low" / "c.py").write_text("from .. import top\n")
    g = build(pkg)
    assert cycles(g) == []  # module by module: a -> b -> c, no cycle
    f = folders(g)
    assert set(f.modules) == {"normviz", "normviz.low", "normviz.high", "normviz.top"}
    assert set(f.edges["normviz.low"]) == {"normviz.high", "normviz.top"}
    assert cycles(f) == [["normviz.high", "normviz.low"]]
    (pkg / "low" / "sub").mkdir()
    (pkg / "low" / "sub" / "__init__.py").write_text("from .. import a\n")
    (pkg / "low" / "d.py").write_text("from .sub import x\n")
    g = build(pkg)
    apart = folders(g, merge=lambda parent, sub: False)
    assert apart.edges["normviz.low.sub"] == {"normviz.low": 1} and "normviz.low.sub" in apart.edges["normviz.low"]
    assert "normviz.low.sub" not in folders(g).modules  # merged into normviz.low by default


def test_the_scanner_sees_lazy_and_importlib_imports(tmp_path):
    """The scan is what the test relies on: a lazy import, an importlib string and a cycle are found."""
    pkg = tmp_path / "normviz"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "low.py").write_text("def f():\n    from . import high\n")
    (pkg / "high.py").write_text("import importlib\nfor m in ('normviz.low',):\n    importlib.import_module(m)\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import high\n")
    g = build(pkg)
    assert g.edges["normviz.low"] == {"normviz.high": 2} and "normviz.low" in g.edges["normviz.high"]
    assert g.edges["normviz.typed"] == {} and cycles(g) == [["normviz.high", "normviz.low"]]


def test_a_folder_is_a_layer():
    """The tree shows the architecture: LAYERS names folders (packages) only, besides the facade and
    ``python -m normviz``, and at most three modules sit loose at the top of ``normviz/``."""
    loose = [m for m, path in GRAPH.modules.items() if m.count(".") == 1 and path.name != "__init__.py"]
    assert len(loose) <= 3 and set(loose) <= {"normviz.__main__"}, loose
    named = [m for layer in LAYERS for m in layer if m not in ("normviz", "normviz.__main__")]
    assert [m for m in named if GRAPH.modules[m].name != "__init__.py"] == []
