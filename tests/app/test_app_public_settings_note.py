"""Issue 42, operator faults: in public mode the note of an ignored setting showed the operator's path to every
visitor ("NORMVIZ_CACHE=/srv/… is a file"); now visitors read that settings were ignored, the log says which."""

from __future__ import annotations

from normviz.ui.kit import settings as kit_settings

from ..helpers.app import app


def _env(tmp_path, public: bool) -> dict:
    f = tmp_path / "operator-secret-cache"
    f.write_text("x")
    return {"NORMVIZ_CACHE": str(f), **({"NORMVIZ_PUBLIC": "1"} if public else {})}


def test_public_visitors_are_not_shown_the_operators_paths(tmp_path):
    s = kit_settings.load_settings(_env(tmp_path, public=True))
    assert any("NORMVIZ_CACHE='/" in p for p in s.problems)  # the log keeps the value
    shown = " ".join(s.visitor_problems())
    assert "/" not in shown and "NORMVIZ_CACHE" not in shown and "ignored" in shown


def test_outside_public_mode_the_note_names_the_setting(tmp_path):
    s = kit_settings.load_settings(_env(tmp_path, public=False))
    assert s.visitor_problems() == s.problems and "NORMVIZ_CACHE='/" in s.problems[0]


def test_the_page_shows_no_operator_path_in_public_mode(tmp_path, monkeypatch):
    for k, v in _env(tmp_path, public=True).items():
        monkeypatch.setenv(k, v)
    kit_settings._CACHE.clear()
    try:
        at = app(query={"text": "The cat sat on the mat."})
        at.run()
        shown = " ".join(w.value for w in at.warning)
        assert "server setting was ignored" in shown and "NORMVIZ_CACHE" not in shown and "/tmp" not in shown
    finally:
        kit_settings._CACHE.clear()
