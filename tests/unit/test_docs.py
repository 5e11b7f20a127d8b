"""The documentation: a short README, the reference in docs/ (mkdocs), every page in the nav, nothing of the old
README's reference lost, and ``mkdocs build --strict`` clean."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from normviz.core.compat import MOVED

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# every heading of the README before the reference moved to docs/ (main at 7926c17, 1,122 lines)
OLD_HEADINGS = (
    "The two commands",
    "Python",
    "Figures (notebooks, papers, offline pages)",
    "Command line",
    "Why this token (prediction attribution)",
    "Information-flow routes",
    "Models",
    "Encoder–decoder models",
    "App",
    "How the maps are computed",
    "Performance",
    "Performance: cross-layer methods",
    "Long inputs and big models",
    "Corpus statistics",
    "Word alignment (encoder–decoders) and the toy translation model",
    "Reliability",
)
OLD_README = "7926c17"


def _headings(text: str) -> set[str]:
    return {m.group(1).strip() for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted(DOCS.glob("*.md")))


def test_the_readme_is_short_and_names_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    assert "bash scripts/app.sh" in readme and "bash scripts/test.sh" in readme
    assert "bash scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
    for link in re.findall(r"\]\(((?:docs|assets)/[^)#]+)", readme):
        assert (ROOT / link).exists(), link


def test_every_old_readme_heading_lands_in_docs():
    found = _headings(_docs_text())
    assert [h for h in OLD_HEADINGS if h not in found] == []


def _moved(line: str) -> str:
    """``line`` with the module paths of the same issue's moves written as they are now (normviz/ui split into
    ui/kit and ui/views, normviz/devtools now tools/; round 5's folders): a line that names a moved module is still the
    same line."""
    where = {p.stem: sub for sub in ("kit", "views") for p in (ROOT / "normviz" / "ui" / sub).glob("*.py")}
    line = re.sub(
        r"normviz\.ui\.(\w+)\b",
        lambda m: f"normviz.ui.{where[m.group(1)]}.{m.group(1)}" if m.group(1) in where else m.group(0),
        line,
    )
    line = re.sub(
        r"normviz/ui/(\w+)\.(py|js)",
        lambda m: f"normviz/ui/{where[m.group(1)]}/{m.group(1)}.{m.group(2)}" if m.group(1) in where else m.group(0),
        line,
    )
    line = line.replace("normviz.devtools.", "tools.").replace("normviz/devtools/", "tools/")
    # round 5: the loose modules moved into the folders of their layers (normviz.core.compat.MOVED)
    line = _FOLDER_NAME.sub(lambda m: f"normviz.{_FOLDERS[m.group(1)]}", line)
    line = line.replace("normviz/encdec/", "normviz/record/encdec/")
    return _FOLDER_FILE.sub(lambda m: f"normviz/{_FOLDERS[m.group(1)].replace('.', '/')}.py", line)


# (`python -m normviz.workers` still names the package: its __main__)
_FOLDERS = {**MOVED, "record": "record.recorder", "session": "session.session", "workers": "workers.process"}
_FOLDER_NAME = re.compile(r"(?<!-m )\bnormviz\.(" + "|".join(sorted(_FOLDERS, key=len, reverse=True)) + r")\b(?![-/])")
_FOLDER_FILE = re.compile(r"normviz/(" + "|".join(sorted(_FOLDERS, key=len, reverse=True)) + r")\.py")


# old README lines rewritten since because what they describe changed (round 5): Esc leaves stage mode on every
# page, the families a Hub id may be (issue 38's architecture rows and the floor), a steps link opens on its step
REWRITTEN = (
    "`f` focuses the token under the mouse",
    "Any Hugging Face Hub id or local directory of a supported",
    "URL (`steps=Weights~0~all~attention+norm;Deep~5~3~norm`)",
    # issue 38: gated FFs are split for GELU and GELU-tanh too, not "SiLU only"
    "model, `encoder_ff` of a gated-GELU T5 v1.1, whose gated FF is split for SiLU only)",
    # issue 40: a family declares one frozen FAMILY = Family(...) record, found by listing the package
    "**Adding a map family** is one module under `normviz/methods/` (see `methods/base.py`), named as its module:",
    "`NAME`, `KEYS` (one `KeyInfo` per key: title, description = its caption, and optionally `short` (the picker's",
    "label), `group`, `unit` (colour bars), `placements`), `REQUIRES`, `NEEDS_MODEL`, `OPT_IN`, `REFERENCES`,",
    "optionally `STACKS` (which stacks its keys apply to), `GROUP`, `UNIT` (defaults for its keys) and `BUDGET =",
    "Budget(NAME)` (its cost option `<NAME>_budget_s`), `check(request, key, options)` (applicability and cost,",
    "before any forward pass) and `compute(inputs, keys, options) -> Output(arrays, notes)`; register it with",
    "`normviz.register_family(module)` (the built-in ones in `methods/__init__.py`). Nothing else is edited: the",
    # issue 42 (screenshots): the model-and-text line moved under the title (from above, where it was cut)
    "model and text above its title, so an exported PNG explains itself;",
)


def test_the_old_readme_text_is_in_docs():
    """Moved, not lost: at least 97 % of the old README's lines (the rest were rewritten for normviz app and the
    new set-up) are in docs/ word for word, module paths as they are after the moves (:func:`_moved`)."""
    old = subprocess.run(["git", "show", f"{OLD_README}:README.md"], cwd=ROOT, capture_output=True, text=True)
    if old.returncode != 0:
        pytest.skip(f"the old README ({OLD_README}) is not in this clone's history")
    docs = set(_docs_text().splitlines())
    lines = [line for line in old.stdout.splitlines() if line.strip() and not line.startswith("#")]
    missing = [line for line in lines if _moved(line) not in docs and not line.startswith(REWRITTEN)]
    assert len(missing) <= 0.03 * len(lines), missing[:20]


def test_every_docs_page_is_in_the_nav():
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = set(re.findall(r"^\s*- [^:\n]+: ([\w./-]+\.md)\s*$", config, re.M))
    pages = {p.name for p in DOCS.glob("*.md")}
    assert pages - nav == set() and nav - pages == set()


@pytest.mark.skipif(
    shutil.which("mkdocs") is None and not (Path(sys.executable).parent / "mkdocs").exists(),
    reason="mkdocs is not installed (requirements-dev.txt)",
)
def test_mkdocs_build_strict(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    cmd = [str(mkdocs) if mkdocs.exists() else "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "site" / "api" / "index.html").exists()
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    assert "Session" in api and "check_options" in api  # the API pages are the docstrings'
