"""One generated block of a docs page, between two marker lines: written, or checked (``--check``) by the test
that keeps the page current (scripts/settings_table.py, scripts/models_table.py)."""

from __future__ import annotations

import sys
from pathlib import Path


def render(current: str, begin: str, end: str, block: str) -> str:
    head, _, rest = current.partition(begin)
    _, _, tail = rest.partition(end)
    return f"{head}{begin}\n{block}{end}{tail}"


def main(argv: list[str], doc: Path, begin: str, end: str, block, script: str) -> int:
    """Write ``block()`` between the markers of ``doc``, or with ``--check`` say whether it is current (exit 1)."""
    current = doc.read_text(encoding="utf-8")
    if begin not in current or end not in current:
        print(f"{doc} lacks the markers {begin} … {end}", file=sys.stderr)
        return 1
    new = render(current, begin, end, block())
    if "--check" in argv:
        if new != current:
            print(f"{doc.relative_to(doc.parents[1])} is not current: run python scripts/{script}", file=sys.stderr)
            return 1
        return 0
    doc.write_text(new, encoding="utf-8")
    return 0
