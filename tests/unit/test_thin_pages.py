"""Issue 40 item 5: the pages compose, the views draw. A page file in app_pages/ stays at most 150 lines and no
function in app_pages/ or normviz/ui/ (any depth, methods and nested functions included) runs past 80 lines: a
longer one is split into named regions (``draw_controls``, ``draw_panels`` …) in normviz/ui/views/. Read from the
source with ast; each offender is reported as file:line with its length."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE_LINES = 150
FUNCTION_LINES = 80
PAGES = sorted((ROOT / "app_pages").glob("*.py"))
UI = sorted((ROOT / "normviz" / "ui").rglob("*.py"))


def long_functions(path: Path, limit: int = FUNCTION_LINES, root: Path = ROOT) -> list[str]:
    """``file:line name (N lines)`` for every function of ``path`` longer than ``limit`` lines (its decorators
    and docstring included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            length = node.end_lineno - first + 1
            if length > limit:
                out.append(f"{path.relative_to(root)}:{node.lineno} {node.name} ({length} lines)")
    return out


def test_there_are_pages_and_ui_modules():
    assert len(PAGES) >= 6 and len(UI) >= 20


def test_every_page_file_is_short():
    long = [
        f"{p.relative_to(ROOT)}:1 ({n} lines)"
        for p in PAGES
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > PAGE_LINES
    ]
    assert long == [], f"page files over {PAGE_LINES} lines (move regions into normviz/ui/views/): {long}"


def test_no_page_or_ui_function_is_long():
    long = [f for p in PAGES + UI for f in long_functions(p)]
    assert long == [], f"functions over {FUNCTION_LINES} lines (split them into named regions): {long}"


def test_the_check_sees_a_long_function(tmp_path):
    """The reader counts what it should: a function of 81 lines (a decorator, its def, 79 body lines) is reported
    with its file, line and length; one of 80 (its def, 79 body lines) is not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    src = tmp_path / "m.py"
    src.write_text(f"import functools\n\n\n@functools.cache\ndef f():\n{body}\n\n\ndef g():\n{body}\n")
    assert long_functions(src, root=tmp_path) == ["m.py:5 f (81 lines)"]
