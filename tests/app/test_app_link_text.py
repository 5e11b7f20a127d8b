"""A link's text survives a browser that mounts the text box without its seeded value.

Streamlit sends a value set through session state with the widget once (``set_value``), in the run that
registers the widget; a browser that mounts the box from a later run's message only falls back to the widget's
default. That default was "", and the link's text became "" on the next rerun (the stage test's paragraph, CI of
stop 36); now it is the view's text."""

from __future__ import annotations

LINK_TEXT = "The committee met on a cold Tuesday morning."


def test_a_links_text_is_also_the_text_boxs_default_on_every_page():
    """A browser that mounts a text box without its seeded value (a later run's widget, set_value unset) falls
    back to the widget's default: the link's text, not an empty box (``default`` of the widget proto)."""
    from ..helpers.app import app, no_exception

    for page, key in (
        ("app.py", "w_text"),
        ("app_pages/0_Why.py", "w_text"),
        ("app_pages/1_Overview.py", "w_text"),
        ("app_pages/5_Trust.py", "w_trust_text"),
    ):
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
