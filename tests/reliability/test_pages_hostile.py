"""Items 1 and 2 of the public-demo hardening: no Markdown/HTML from visitor input, no traceback for a visitor.

Every page is driven with Markdown/HTML payloads in every query parameter; the texts Streamlit would render as
Markdown must hold no link, image, raw HTML or autolink built from them, and nothing may show a traceback.
"""

from __future__ import annotations

import pytest

from normviz.ui.kit import data as ui_data
from normviz.ui.kit.state import ViewState

from .helpers import PAGES, PAYLOADS, app, details_shown, markup_hits, messages, tracebacks

PARAMS = [f for f in ViewState.__dataclass_fields__ if f != "problems"] + ["unknown_param"]


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for name in (
        "NORMVIZ_ALLOWED_MODELS",
        "NORMVIZ_MAX_TOKENS",
        "NORMVIZ_PUBLIC",
        "NORMVIZ_CORPUS_MAX_LINES",
        "NORMVIZ_FF_BUDGET",
        "NORMVIZ_COST_BUDGET",
        "NORMVIZ_MAX_UPLOAD_MB",
    ):
        monkeypatch.delenv(name, raising=False)


def _check(at):
    at.run()
    assert not tracebacks(at), tracebacks(at)
    hits = markup_hits(at)
    assert not hits, hits


@pytest.mark.parametrize("page", PAGES[:2])
@pytest.mark.parametrize("param", PARAMS)
def test_payload_in_every_parameter_renders_no_markup(page, param):
    payload = " ".join(PAYLOADS)
    _check(app(page, {param: payload}))


@pytest.mark.parametrize("page", PAGES[2:])
def test_payload_in_every_parameter_learn_and_corpus(page):
    """Learn and Corpus read only model and presentation from the view: every parameter at once, then the
    model on its own (it stops the page early). The full matrix runs with -m slow."""
    payload = " ".join(PAYLOADS)
    _check(app(page, {p: payload for p in PARAMS if p != "model"}))
    _check(app(page, {"model": payload}))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES[2:])
@pytest.mark.parametrize("param", PARAMS)
def test_payload_in_every_parameter_full(page, param):
    _check(app(page, {param: " ".join(PAYLOADS)}))


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_each_payload_as_the_text_and_model(page):
    for p in PAYLOADS:
        _check(app(page, {"text": p, "pair": p}))
        _check(app(page, {"model": p}))


@pytest.mark.parametrize("allow", ["minilm", None])
def test_model_payload_with_and_without_the_allowlist(monkeypatch, allow):
    if allow:
        monkeypatch.setenv("NORMVIZ_ALLOWED_MODELS", allow)
    for p in PAYLOADS:
        _check(app("app.py", {"model": p}))


def test_escaped_text_still_reads_as_typed():
    at = app("app.py", {"layer": PAYLOADS[0]})
    at.run()
    shown = [m for m in messages(at) if "layer" in m]
    assert shown and "Verify your account" in shown[0].replace("\\", "")


# --- no traceback ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", PAGES)
def test_duplicate_map_names_are_dropped_with_a_note(page):
    at = app(page, {"maps": "norm,norm,attention,norm"})
    _check(at)
    if page == "app.py":
        assert any("more than once" in m for m in messages(at))
        assert at.query_params["maps"] == "norm,attention"


def test_same_map_for_map_and_compare_on_overview():
    at = app("app_pages/1_Overview.py")
    at.run()
    at.selectbox(key="w_ov_compare").set_value(at.selectbox(key="w_ov_map").value).run()
    assert not tracebacks(at)
    at2 = app("app_pages/1_Overview.py", {"overview_map": "norm", "overview_compare": "norm"})
    _check(at2)


BAD_SETTINGS = [
    ("NORMVIZ_ALLOWED_MODELS", " , ", "NORMVIZ_ALLOWED_MODELS"),
    ("NORMVIZ_CORPUS_MAX_LINES", "abc", "NORMVIZ_CORPUS_MAX_LINES"),
    ("NORMVIZ_CORPUS_MAX_LINES", "0", "NORMVIZ_CORPUS_MAX_LINES"),
    ("NORMVIZ_CORPUS_MAX_LINES", "-5", "NORMVIZ_CORPUS_MAX_LINES"),
    ("NORMVIZ_MAX_TOKENS", "abc", "NORMVIZ_MAX_TOKENS"),
    ("NORMVIZ_MAX_TOKENS", "-1", "NORMVIZ_MAX_TOKENS"),
    ("NORMVIZ_FF_BUDGET", "nan", "NORMVIZ_FF_BUDGET"),
    ("NORMVIZ_COST_BUDGET", "-3", "NORMVIZ_COST_BUDGET"),
    ("NORMVIZ_MAX_UPLOAD_MB", "lots", "NORMVIZ_MAX_UPLOAD_MB"),
    ("NORMVIZ_PUBLIC", "maybe", "NORMVIZ_PUBLIC"),
]
CASES = (
    [(p, *b) for p in PAGES for b in BAD_SETTINGS[:2]]
    + [("app_pages/3_Corpus.py", *b) for b in BAD_SETTINGS[2:4]]
    + [("app.py", *b) for b in BAD_SETTINGS[4:]]
)


@pytest.mark.parametrize("page,env,value,name", CASES)
def test_bad_settings_are_named_and_fall_back(monkeypatch, page, env, value, name):
    monkeypatch.setenv(env, value)
    at = app(page)
    _check(at)
    notes = [m for m in messages(at) if name in m.replace("\\", "")]
    assert notes and repr(value).replace("\\", "") in notes[0].replace("\\", "") and "using" in notes[0]


def test_out_of_range_link_values_are_clamped_with_a_note():
    at = app("app.py", {"layer": "999", "head": "999", "focus": "999"})
    _check(at)
    notes = " ".join(messages(at)).replace("\\", "")
    assert "layer=999" in notes and "head=999" in notes and "focus=999" in notes
    assert at.slider(key="w_layer").value == 5 and at.selectbox(key="w_head").value == -1


def test_a_text_longer_than_the_cap_is_cut_with_a_note(monkeypatch):
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "16")
    at = app("app.py", {"text": "word " * 10_000})
    _check(at)
    notes = " ".join(messages(at)).replace("\\", "")
    assert "50,000 characters" in notes and "800" in notes
    assert len(at.text_input(key="w_text").value) == 800


def _boom(*a, **k):
    raise RuntimeError("kaboom in /srv/secret/normviz/internal.py")


@pytest.mark.parametrize("public", [False, True])
def test_unexpected_error_is_a_short_message(monkeypatch, public):
    if public:
        monkeypatch.setenv("NORMVIZ_PUBLIC", "1")
    monkeypatch.setattr(ui_data, "build_panels", _boom)
    at = app("app.py")
    at.run()
    assert not at.exception and not tracebacks(at)
    assert any("Something went wrong" in e.value for e in at.error)
    assert details_shown(at) is (not public)
    shown = " ".join(e.value for e in at.error) + " ".join(t.value for t in at.text)
    assert ("/srv/secret" in shown) is (not public)


def test_public_mode_defaults_the_allowlist_and_hides_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("NORMVIZ_PUBLIC", "1")
    at = app("app.py", {"model": str(tmp_path)})
    _check(at)
    assert at.selectbox(key="w_model_choice").options == ["minilm", "smollm2"]
    assert not any(str(tmp_path) in m.replace("\\", "") for m in messages(at) if "available" not in m)


def test_a_directory_and_a_missing_path_read_the_same(tmp_path):
    texts = []
    for target in (tmp_path, tmp_path / "missing"):
        at = app("app.py", {"model": str(target)})
        _check(at)
        texts.append([e.value.replace("\\", "").replace(str(target), "X") for e in at.error])
    assert texts[0] == texts[1]


def test_upload_refusal_before_reading():
    assert ui_data.upload_refusal("a.txt", 50 * 2**20, 5 * 2**20).startswith("The file 'a.txt' is 50.0 MB")
    assert ui_data.upload_refusal("a.txt", 1000, 5 * 2**20) is None


WHY = "app_pages/0_Why.py"
WHY_PARAMS = ["position", "token", "foil", "tau"]


def test_why_page_payloads_render_no_markup():
    """The Why page (issue 21): payloads in the text and in each of its own parameters (position, token,
    foil, tau) on smollm2: no markup from them, no traceback, every bad value named."""
    payload = " ".join(PAYLOADS)
    at = app(WHY, {"model": "smollm2", "text": payload, **{p: payload for p in WHY_PARAMS}})
    _check(at)
    import re

    shown = re.sub(r"\\([^A-Za-z0-9\s])", r"\1", " ".join(messages(at)))
    for p in WHY_PARAMS:
        assert f"link's {p}" in shown, (p, shown[:400])
    # out-of-range and odd-but-valid values: named or clamped, still no traceback
    _check(
        app(
            WHY,
            {
                "model": "smollm2",
                "text": "The capital of France is",
                "position": "99",
                "tau": "0.9",
                "token": " Paris Paris",
                "foil": "12345678901",
            },
        )
    )
