"""One name for stage mode (issue 29: the sidebar said "Presentation mode" while the README said "Stage mode"):
the toggles of Explore and Translate say "Stage mode", and no page, doc or the README uses the other name."""

from __future__ import annotations

from pathlib import Path

from ..helpers.app import ROOT, app, no_exception

OLD = "presentation mode"


def _user_facing() -> list[Path]:
    files = [ROOT / "README.md", ROOT / "app.py", *(ROOT / "docs").glob("*.md"), *(ROOT / "app_pages").glob("*.py")]
    return files + [p for p in (ROOT / "normviz" / "ui").rglob("*") if p.suffix in (".py", ".js")]


def test_no_page_doc_or_readme_calls_it_presentation_mode():
    said = [str(p.relative_to(ROOT)) for p in _user_facing() if OLD in p.read_text(encoding="utf-8").lower()]
    assert not said, said
    assert "Stage mode" in (ROOT / "README.md").read_text(encoding="utf-8") or "Stage mode" in (
        ROOT / "docs" / "stage.md"
    ).read_text(encoding="utf-8")


def test_the_sidebar_toggle_is_called_stage_mode():
    at = app()
    at.run()
    no_exception(at)
    assert at.sidebar.toggle(key="w_present").label.startswith("Stage mode")
