"""The app as one multi-page app (app.py's st.navigation): pages named in the sidebar, state shared by all."""

from __future__ import annotations

import normviz
from normviz.ui.kit.pages import discover

from ..helpers.app import ROOT, app, no_exception, texts


def test_pages_are_discovered_in_order_with_explore_first():
    pages = discover(ROOT / "app_pages")
    assert [p.title for p in pages][:5] == ["Explore", "Why", "Overview", "Learn", "Corpus"]
    assert pages[0].default and pages[0].url_path == ""
    assert [p.url_path for p in pages[1:5]] == ["Why", "Overview", "Learn", "Corpus"]


def test_switching_pages_keeps_text_model_layer_and_head():
    at = app("app.py")
    at.run()
    no_exception(at)
    at.text_input(key="w_text").set_value("Dogs bark at night.").run()
    at.slider(key="w_layer").set_value(3).run()
    at.selectbox(key="w_head").set_value(5).run()
    no_exception(at)
    want = {"text": "Dogs bark at night.", "layer": "3", "head": "5"}
    assert {k: at.query_params[k] for k in want} == want
    for page in (
        "app_pages/1_Overview.py",
        "app_pages/2_Learn.py",
        "app_pages/0_Explore.py",
        "app_pages/1_Overview.py",
        "app_pages/0_Explore.py",
    ):
        at.switch_page(page)
        at.run()
        no_exception(at)
        assert not any("text is empty" in e for e in texts(at.error)), (page, texts(at.error))
        assert {k: at.query_params[k] for k in want} == want, page
        assert at.selectbox(key="w_model_choice").value == "minilm"
    assert at.text_input(key="w_text").value == "Dogs bark at night."
    assert at.slider(key="w_layer").value == 3
    assert at.selectbox(key="w_head").value == 5


def test_text_typed_on_overview_reaches_explore():
    at = app("app.py")
    at.run()
    at.switch_page("app_pages/1_Overview.py")
    at.run()
    at.text_input(key="w_text").set_value("Birds sing.").run()
    at.switch_page("app_pages/0_Explore.py")
    at.run()
    no_exception(at)
    assert at.text_input(key="w_text").value == "Birds sing."
    assert at.query_params["text"] == "Birds sing."


def test_a_page_link_query_applies_on_the_next_page():
    """Explore's "What is this?" links carry ?lesson=<key>; the Learn page opens that tab."""
    at = app("app.py", query={"text": "Dogs bark."})
    at.run()
    at.query_params["lesson"] = "flow"
    at.switch_page("app_pages/2_Learn.py")
    at.run()
    no_exception(at)
    assert at.query_params["lesson"] == "flow" and at.query_params["text"] == "Dogs bark."
    assert tab_container(at._tree).tab_container.default_tab_index == normviz.all_keys("post").index("flow")


def tab_container(node):
    for child in getattr(node, "children", {}).values():
        if getattr(child, "type", "") == "tab_container":
            return child.proto
        found = tab_container(child)
        if found is not None:
            return found
    return None
