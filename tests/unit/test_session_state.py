"""Session owns its state (issue 40): no module outside the Session class reads or writes a session's private
attribute — the maps, notes, views, layer-map cache, frozen coefficients and lock are one object,
``session.store`` (:class:`normviz.session.store.MapStore`), that the session hands to its jobs."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "normviz" / "session" / "session.py"


def _private_names() -> set[str]:
    """Every private attribute and method of the Session class: ``self._x = …`` and ``def _x``."""
    tree = ast.parse(SESSION.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Session")
    names = {n.name for n in cls.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")}
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
            and node.attr.startswith("_")
        ):
            names.add(node.attr)
    return {n for n in names if not n.startswith("__")}


def _reads(path: Path, private: set[str], root: Path = ROOT) -> list[str]:
    """``<not self>._x`` and ``getattr(…, "_x")`` for the session's private names ``_x``, with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in private
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno} .{node.attr}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in private
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno} {node.func.id}(…, {node.args[1].value!r})")
    return found


def test_the_session_class_has_private_state_to_protect():
    private = _private_names()
    assert "_waits" in private and "_stack" in private  # the scan reads the class (a renamed class would pass)


def test_no_module_outside_the_session_class_touches_its_private_state():
    private = _private_names()
    files = [p for p in (ROOT / "normviz").rglob("*.py") if p != SESSION]
    files += [ROOT / "app.py", *sorted((ROOT / "app_pages").glob("*.py"))]
    found = [hit for p in files for hit in _reads(p, private)]
    assert not found, "a session's private state read from outside its class (use session.store):\n" + "\n".join(found)


def test_the_scan_finds_a_private_read(tmp_path):
    """The check can fail: a module that reads ``session._waits`` or getattr(session, "_stack") is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f(session):\n    return session._waits, getattr(session, '_stack')\n", encoding="utf-8")
    assert len(_reads(bad, _private_names(), tmp_path)) == 2
