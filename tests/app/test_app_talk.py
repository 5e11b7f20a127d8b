"""A talk on stage: a link's steps (a + read as a space still joins maps; an unreadable step is named), the
step on screen named and numbered, the talk link that round-trips, and the theme carried in the URL."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from normviz.ui.kit.state import ViewState
from normviz.ui.kit.steps import Step

from ..helpers.app import app, no_exception, texts


def _query(at) -> dict:
    return {k: (v[-1] if isinstance(v, list) else v) for k, v in at.query_params.items()}


def test_a_readme_talk_link_with_a_plain_plus_keeps_every_step_and_names_a_bad_one():
    # what the browser hands the server for `steps=Weights~0~all~attention+norm;…`: the + is a space
    at = app(query={"steps": "Weights~0~all~attention norm;Oops~x~all~norm;Deep~3~1~norm", "present": "1"})
    at.run()
    no_exception(at)
    view = at.session_state["_normviz_view"]
    assert [(s.name, s.maps) for s in view.steps] == [("Weights", ("attention", "norm")), ("Deep", ("norm",))]
    warned = " ".join(texts(at.warning))
    assert "step 2" in warned and "Oops~x~all~norm" in warned, warned
    shown = " ".join(texts(at.markdown))
    # issue 42 item 10: the link opens on its first step (before: "2 steps · PageDown shows the first")
    assert "Step 1 of 2 · Weights" in shown, shown
    assert at.slider(key="w_layer").value == 0 and view.maps == ("attention", "norm")


def test_the_step_indicator_names_and_numbers_the_step_on_stage():
    at = app(query={"steps": "Weights~0~all~attention+norm;Deep~3~1~norm", "present": "1"})
    at.run()
    no_exception(at)
    from normviz.ui.kit import stage

    at.sidebar.radio(key="w_step_go").set_value(1).run()
    no_exception(at)
    shown = " ".join(texts(at.markdown))
    assert "Step 2 of 2 · Deep" in shown, shown
    assert stage.step_text(at.session_state["_normviz_view"], 0) == "Step 1 of 2 · Weights"


def test_the_talk_link_round_trips_every_step_and_encodes_its_separators():
    steps = (Step("Weights & norms", 0, None, ("attention", "norm")), Step("Deep", 5, 3, ("norm", "attn_res")))
    view = ViewState(text="Paris is the capital of France; really?", steps=steps, present=True, theme="dark")
    from normviz.ui.kit.stage import talk_link

    link = talk_link(view, "http://host:8501/?old=1")
    query = urlsplit(link).query
    assert link.startswith("http://host:8501/?") and "old=" not in link
    assert "+" not in query and ";" not in query and "%2B" in query and "%3B" in query
    back = ViewState.from_query({k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()})
    assert back == view and back.problems == []


def test_the_sidebar_shows_the_talk_link_once_there_are_steps():
    at = app(query={"steps": "Weights~0~all~attention+norm;Deep~3~1~norm"})
    at.run()
    no_exception(at)
    codes = [c.value for c in at.sidebar.code]
    assert len(codes) == 1 and "steps=Weights~0~all~attention%2Bnorm%3BDeep~3~1~norm" in codes[0], codes
    assert "present=1" in codes[0], codes  # issue 42 item 10: a talk link opens on stage


def test_a_steps_link_opens_on_its_first_step():
    at = app(query={"steps": "Deep~3~1~norm;Weights~0~all~attention", "present": "1", "layer": "5"})
    at.run()
    no_exception(at)
    assert at.slider(key="w_layer").value == 3 and at.selectbox(key="w_head").value == 1
    assert "Step 1 of 2 · Deep" in " ".join(texts(at.markdown))


def test_the_theme_of_a_link_stays_in_the_url_and_in_the_links_the_app_makes():
    at = app(query={"theme": "dark"})
    at.run()
    no_exception(at)
    assert _query(at).get("theme") == "dark"
    assert at.session_state["_normviz_view"].theme == "dark"
    links = [el for el in at.get("page_link")]
    assert links, "no page link on Explore"
    assert all("theme=dark" in el.proto.query_string for el in links), [el.proto.query_string for el in links]
    bad = app(query={"theme": "purple"})
    bad.run()
    assert any("theme" in w and "dark or light" in w for w in texts(bad.warning))


def test_translate_keeps_the_theme_too():
    at = app("app_pages/4_Translate.py", query={"theme": "light"})
    at.run()
    no_exception(at)
    assert _query(at).get("theme") == "light"
