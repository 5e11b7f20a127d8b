"""Every ``alias.name`` read on an imported normviz module names something that module has.

A lint pass once dropped a re-export (``follow_theme`` from ``ui.kit.st_parts``) that only a page used; the page
then failed on every visit while ruff and mypy (which does not check app_pages/) passed. This test reads the pages,
app.py and the package and imports each module they alias, so such a name fails here, before any browser test."""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted([ROOT / "app.py", *(ROOT / "app_pages").glob("*.py"), *(ROOT / "normviz").rglob("*.py")])


def _module_aliases(tree: ast.Module, path: Path) -> dict[str, str]:
    """Names bound at any level of the file to a normviz module: ``import a.b as x``, ``from a import b as x``."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("normviz") and a.asname:
                    found[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")
                parent = parent[: len(parent) - (node.level - 1)] if node.level > 1 else parent
                base = ".".join([*parent, *([base] if base else [])])
            if not base.startswith("normviz"):
                continue
            for a in node.names:
                full = f"{base}.{a.name}"
                try:
                    is_module = isinstance(importlib.import_module(full), types.ModuleType)
                except ImportError:
                    is_module = False
                if is_module:
                    found[a.asname or a.name] = full
    return found


def _reads(tree: ast.Module, aliases: dict[str, str]):
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and isinstance(node.ctx, ast.Load)
        ):
            yield node.value.id, node.attr, node.lineno


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_read_on_an_imported_module_exists(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases = _module_aliases(tree, path)
    missing = [
        f"{path.relative_to(ROOT)}:{line}: {alias}.{attr} ({aliases[alias]} has no {attr!r})"
        for alias, attr, line in _reads(tree, aliases)
        if not hasattr(importlib.import_module(aliases[alias]), attr)
    ]
    assert not missing, "\n".join(missing)
