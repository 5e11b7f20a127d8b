"""A value seeded through session state reaches the browser even when the run that seeded it did not finish.

Streamlit sends such a value with the widget once (``set_value``), in the run that registers the widget; a run
stopped between registration and delivery (a rerun request, under load) left the browser a text box with its
default only, and the link's text became "" on the next rerun (the stage test's paragraph, CI of stop 36).
``ui.page.run_page`` sends every page widget value again after an unfinished run."""
from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _page():
    import streamlit as st

    from normviz.ui.kit import page, session_view

    def body():
        session_view.seed("w_text", "a link's paragraph")
        st.text_input("Text", key="w_text")
        st.session_state["runs"] = st.session_state.get("runs", 0) + 1
        if st.session_state["runs"] == 1 and st.session_state.get("stop_first"):
            st.stop()  # this run ends without finishing, as an interrupted one does

    page.run_page(body)


def _sent(at) -> tuple[bool, str]:
    proto = at.text_input(key="w_text").proto
    return proto.set_value, proto.value


def test_after_an_unfinished_run_the_next_run_sends_the_seeded_value_again():
    at = AppTest.from_function(_page)
    at.session_state["stop_first"] = True
    at.run(timeout=60)
    assert _sent(at) == (True, "a link's paragraph")  # the seeding run: sent with the widget
    at.run(timeout=60)
    assert _sent(at) == (True, "a link's paragraph")  # sent again: the first run did not finish
    at.run(timeout=60)
    assert _sent(at)[0] is False  # the second run finished: the browser has the value, only the default is sent
    assert at.text_input(key="w_text").value == "a link's paragraph"


def test_after_a_finished_run_nothing_is_sent_again():
    at = AppTest.from_function(_page)
    at.run(timeout=60)
    at.run(timeout=60)
    assert _sent(at)[0] is False
    at.text_input(key="w_text").set_value("typed").run(timeout=60)
    assert at.text_input(key="w_text").value == "typed"


LINK_TEXT = "The committee met on a cold Tuesday morning."


def test_a_links_text_is_also_the_text_boxs_default_on_every_page():
    """A browser that mounts a text box without its seeded value (a later run's widget, set_value unset) falls
    back to the widget's default: the link's text, not an empty box (``default`` of the widget proto)."""
    from ..helpers.app import app, no_exception

    for page, key in (("app.py", "w_text"), ("app_pages/0_Why.py", "w_text"), ("app_pages/1_Overview.py", "w_text"),
                      ("app_pages/5_Trust.py", "w_trust_text")):
        at = app(page, {"text": LINK_TEXT, "present": "1"})
        at.run()
        no_exception(at)
        at.run()  # a later run: the widget is sent without its seeded value
        box = at.text_input(key=key)
        assert (box.value, box.proto.set_value, box.proto.default) == (LINK_TEXT, False, LINK_TEXT), page
    at = app("app_pages/4_Translate.py", {"src": "a b c", "tgt": "x y"})
    at.run()
    at.run()
    assert [at.text_input(key=k).proto.default for k in ("tr_src", "tr_tgt", "tr_model")] == ["a b c", "x y", "toy-mt"]
