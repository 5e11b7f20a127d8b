"""What the pages drop or change is said (issue 22 item 6): the pair when the first box fills the limit, an
encoder–decoder named on Explore (pointed to Translate), a long token in a refusal (cut)."""

from __future__ import annotations

from ..helpers.app import app, no_exception, texts


def _messages(at) -> list[str]:
    return texts(list(at.warning) + list(at.info) + list(at.error))


def test_both_boxes_full_says_the_pair_was_dropped(monkeypatch):
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "8")  # 400 characters a text
    at = app("app.py", {"text": "the cat sat " * 40, "pair": "a dog barked"})
    at.run()
    no_exception(at)
    said = [m for m in _messages(at) if "Both boxes are full" in m]
    assert len(said) == 1 and "the second text (12 characters) was dropped" in said[0] and "not as a pair" in said[0]


def test_the_second_text_cut_is_said_of_the_second_text(monkeypatch):
    monkeypatch.setenv("NORMVIZ_MAX_TOKENS", "8")
    at = app("app.py", {"text": "the cat sat " * 30, "pair": "a dog barked " * 10})
    at.run()
    no_exception(at)
    assert any("the second text is cut to its first 40 of 130 characters" in m for m in _messages(at)), _messages(at)


def test_an_encoder_decoder_on_explore_points_to_translate(monkeypatch):
    monkeypatch.setenv("NORMVIZ_ALLOWED_MODELS", "minilm,toy-mt")
    at = app("app.py", {"model": "toy-mt"})
    at.run()
    no_exception(at)
    said = [m for m in _messages(at) if "toy-mt is an encoder–decoder" in m]
    assert len(said) == 1 and "Translate" in said[0] and "minilm instead" in said[0]
    assert at.selectbox(key="w_model_choice").value == "minilm"


def test_a_long_token_in_a_refusal_is_cut():
    at = app(
        "app_pages/4_Translate.py", {"src": "the cat sees a dog", "tgt": "mao vidas un inu", "gold": "0-" + "9" * 3990}
    )
    at.run()
    no_exception(at)
    said = [m for m in _messages(at) if "Gold alignment" in m]
    assert len(said) == 1 and "3,990 digits" in said[0] and len(said[0]) < 200, said


def test_a_dropped_query_string_arrives_as_a_marker():
    from streamlit.runtime import app_session

    from normviz.ui.kit.url_check import MARKER, install

    assert install() and install()  # once per process, idempotent
    assert app_session.sanitize_query_string("text=" + "a" * 600_000) == f"{MARKER}=chars:600005"
    assert app_session.sanitize_query_string("&".join(["a=1"] * 1001)) == f"{MARKER}=fields:1001"
    assert app_session.sanitize_query_string("text=cat&layer=2") == "text=cat&layer=2"


def test_a_dropped_query_string_is_said_on_explore_and_translate():
    from normviz.ui.kit.url_check import MARKER

    for page in ("app.py", "app_pages/4_Translate.py"):
        at = app(page, {MARKER: "chars:600013"})
        at.run()
        no_exception(at)
        said = [m for m in _messages(at) if "query string" in m]
        assert len(said) == 1 and "600,013 characters" in said[0] and "524,288" in said[0], _messages(at)
        assert MARKER not in at.query_params
    at = app("app.py", {MARKER: "chars:" + "9" * 400})  # a forged marker is not echoed
    at.run()
    assert not [m for m in _messages(at) if "query string" in m]
