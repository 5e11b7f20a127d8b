"""The package's import graph, read from its source (lazy imports inside functions and importlib strings
included, :mod:`tools.module_graph`): no import cycle, and no import from a lower layer to a higher
one. A new module must be placed in LAYERS (longest prefix wins), so its place is a decision, not an accident."""
from __future__ import annotations

from tools.module_graph import build, cycles

# lowest first; a module may import modules of its own layer or below
LAYERS = (
    ("normviz.errors", "normviz.commands"),
    ("normviz.backend", "normviz.activations", "normviz.tokens", "normviz.inputs", "normviz.analysis",
     "normviz.fx", "normviz.pool", "normviz.memory"),
    ("normviz.models",),
    ("normviz.record", "normviz.attention_capture", "normviz.alpha_into", "normviz.attention_interface", "normviz.recording", "normviz.decompose", "normviz.encdec.params", "normviz.encdec.record",
     "normviz.encdec.target"),
    ("normviz.methods", "normviz.encdec"),
    ("normviz.keyspace",),
    ("normviz.attribution", "normviz.attribution.seq2seq"),  # prediction attribution: below the Session that calls it
    ("normviz.session",),
    ("normviz.corpus", "normviz.align", "normviz.workers", "normviz.attribution.cli"),
    ("normviz.viz", "normviz.notebook"),
    ("normviz",),  # the package's facade: normviz/__init__.py
    ("normviz.cli", "normviz.__main__"),
    ("normviz.ui",),
)


def layer_of(module: str) -> int:
    best, found = -1, None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or (p != "normviz" and module.startswith(p + "."))) and len(p) > best:
                best, found = len(p), i
    assert found is not None, f"{module} has no layer: place it in LAYERS"
    return found


GRAPH = build()


def test_every_module_has_a_layer():
    for m in GRAPH.modules:
        layer_of(m)


def test_no_import_cycle():
    assert cycles(GRAPH) == []


def test_no_import_goes_up_the_layers():
    up = [f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)}) at line {line}"
          for a, b, line in GRAPH.edge_list() if layer_of(b) > layer_of(a)]
    assert up == []


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
