"""Write the tables of docs/settings.md from normviz.core.settings (the one place settings are declared).

python scripts/settings_table.py          # rewrite the part between the markers
python scripts/settings_table.py --check  # exit 1 when the file is not current (tests/unit/test_settings.py)
"""

from __future__ import annotations

import sys
from pathlib import Path

import doc_block  # scripts/doc_block.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from normviz import methods, settings  # noqa: E402,F401  (methods: registers the families' budget options)

DOC = ROOT / "docs" / "settings.md"
BEGIN, END = "<!-- settings-table:begin (scripts/settings_table.py writes this part) -->", "<!-- settings-table:end -->"
SCOPES = {
    "app": "The app",
    "library": "The library (and so the app and the CLI)",
    "cli": "The command line",
    "server": "Set by the app's server for its worker processes",
    "scripts": "The scripts",
    "tests": "Tests and benchmarks",
}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def tables() -> str:
    out = ["## Environment variables", ""]
    for scope, title in SCOPES.items():
        rows = [s for s in settings.ENV.values() if s.scope == scope]
        if not rows:
            continue
        out += [f"### {title}", "", "| variable | type | default | range | meaning |", "|---|---|---|---|---|"]
        out += [
            f"| `{s.name}` | {s.kind} | {_cell(s.default_text)} | {_cell(s.range)} | {_cell(s.doc)} |" for s in rows
        ]
        out.append("")
    out += [
        "## Options",
        "",
        "`--option KEY=VALUE` on the command line (repeatable), `options={KEY: VALUE}` in "
        "Python (`normviz.analyze`, `Session`). An unknown name or a value of the wrong type is refused on one "
        "line (the command line exits with 2).",
        "",
        "| option | type | default | range | meaning |",
        "|---|---|---|---|---|",
    ]
    out += [
        f"| `{s.name}` | {s.kind} | {_cell(s.default_text)} | {_cell(s.range)} | {_cell(s.doc)} |"
        for s in sorted(settings.OPTIONS.values(), key=lambda s: s.name)
    ]
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str]) -> int:
    return doc_block.main(argv, DOC, BEGIN, END, tables, "settings_table.py")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
