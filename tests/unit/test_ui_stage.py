"""Stage mode's pure parts and the talk-ready labels: the arrow keys move the page's own controls, Esc leaves,
panels name model and text literally, compared panels share one colour scale, map pills are unique."""

from __future__ import annotations

import numpy as np

from normviz.methods import registry
from normviz.ui.kit import data, stage


def _press(monkeypatch, state: dict, key: str, leave=lambda: None):
    state[stage.KEYS_WIDGET] = {"key": key}
    monkeypatch.setattr(stage.st, "session_state", state)
    stage._on_key("w_layer", list(range(6)), "w_head", [-1] + list(range(12)), leave)


def test_arrow_keys_move_layer_and_head_within_their_options(monkeypatch):
    state = {"w_layer": 0, "w_head": -1}
    _press(monkeypatch, state, "layer-")
    assert state["w_layer"] == 0  # clamped at the first layer
    for _ in range(3):
        _press(monkeypatch, state, "layer+")
    _press(monkeypatch, state, "head+")
    assert (state["w_layer"], state["w_head"]) == (3, 0)  # all heads → head 0
    for _ in range(20):
        _press(monkeypatch, state, "layer+")
        _press(monkeypatch, state, "head+")
    assert (state["w_layer"], state["w_head"]) == (5, 11)
    _press(monkeypatch, state, "head-")
    assert state["w_head"] == 10


def test_escape_leaves_stage_mode(monkeypatch):
    from normviz.ui.kit.state import ViewState

    state = {"w_present": True, "_normviz_view": ViewState(present=True), "w_layer": 2}
    monkeypatch.setattr(stage.st, "session_state", state)
    _press(monkeypatch, state, "leave", leave=stage.leave_stage)
    assert state["w_present"] is False and state["_normviz_view"].present is False and state["w_layer"] == 2


def test_the_context_line_is_literal_and_cut():
    text = stage.context_text("minilm", "<b>bold</b> & " + "word " * 40)  # as typed: the builders escape it once
    assert text.startswith("minilm · “<b>bold</b> & word") and text.endswith("…”") and len(text) < 100
    import plotly.graph_objects as go

    fig = go.Figure()
    stage.context_line(fig, "minilm", "<b>bold</b> & " + "word " * 40, 12)
    line = fig.layout.title.text  # no title of its own: the line is the title
    assert line.startswith("minilm · “&lt;b&gt;bold&lt;/b&gt; &amp; word") and "<b>" not in line


def test_compared_panels_share_one_colour_scale_per_map():
    def panel(key, m):
        return data.Panel(key, key, np.asarray(m, float), [], [], [])

    left = [panel("attention", [[0.2, 0.8]]), panel("norm", [[1.0, 3.0]])]
    right = [panel("attention", [[0.1, 0.6]]), panel("norm", [[2.0, 5.0]])]
    a, b = data.compared_ranges(left, right, shared=False)
    assert a == b == [(0.0, 0.8), (0.0, 5.0)]
    a, b = data.compared_ranges(left, right, shared=True)
    assert a == b == [(0.0, 5.0)] * 2


def test_every_map_pill_has_its_own_label():
    labels = data.pill_labels(registry.all_keys())
    assert len(set(labels.values())) == len(labels)
    assert labels["alti"] == "ALTI" and labels["rollout_alti"] == "ALTI · rollout"


def test_steps_round_trip_through_the_url_and_refuse_malformed_ones():
    from normviz.ui.kit.state import ViewState
    from normviz.ui.kit.steps import Step, clean_name, following

    steps = (Step("Weights", 0, None, ("attention", "norm")), Step(clean_name("Deep; ~x+y"), 5, 3, ("norm",)))
    view = ViewState(steps=steps)
    assert view.to_query()["steps"] == "Weights~0~all~attention+norm;Deep x y~5~3~norm"
    assert ViewState.from_query(view.to_query()) == view
    for bad in ("x", "a~b~all~norm", "a~1~all~", "a~1~all~Norm<b>"):
        got = ViewState.from_query({"steps": bad})
        assert got.steps == () and len(got.problems) == 1, bad
    assert [following(steps, None, 1), following(steps, 0, 1), following(steps, 1, 1), following(steps, 1, -1)] == [
        0,
        1,
        1,
        0,
    ]
    assert following((), None, 1) is None


def test_next_step_sets_the_pages_own_widgets(monkeypatch):
    from normviz.ui.kit.state import ViewState
    from normviz.ui.kit.steps import Step

    view = ViewState(steps=(Step("a", 1, None, ("attention",)), Step("b", 4, 2, ("norm", "rollout_alti"))))
    state = {"_normviz_view": view}
    monkeypatch.setattr(stage.st, "session_state", state)
    groups = data.grouped(registry.all_keys())
    stage.walk_steps(1, groups)
    assert (state["w_layer"], state["w_head"], state["w_maps"]) == (1, -1, ["attention"])
    stage.walk_steps(1, groups)
    assert (state["w_layer"], state["w_head"], state["w_maps"], state["w_maps_across"]) == (
        4,
        2,
        ["norm"],
        ["rollout_alti"],
    )
    assert view.maps == ("norm", "rollout_alti") and state["_normviz_step"] == 1


def test_a_plus_read_as_a_space_still_joins_the_maps_of_a_step():
    """A link typed as ``steps=…attention+norm…`` arrives with a space for the + (form encoding): same steps."""
    from normviz.ui.kit.state import ViewState

    got = ViewState.from_query({"steps": "Weights~0~all~attention norm;Deep~5~3~norm"})
    assert got.problems == []
    assert [(s.name, s.layer, s.head, s.maps) for s in got.steps] == [
        ("Weights", 0, None, ("attention", "norm")),
        ("Deep", 5, 3, ("norm",)),
    ]


def test_a_step_that_cannot_be_read_is_named_and_the_others_kept():
    from normviz.ui.kit.state import ViewState

    got = ViewState.from_query({"steps": "Weights~0~all~attention;Bad~x~all~norm;Deep~5~3~norm<b>;Last~2~1~norm"})
    assert [s.name for s in got.steps] == ["Weights", "Last"]
    assert len(got.problems) == 2
    assert "step 2" in got.problems[0] and "'Bad~x~all~norm'" in got.problems[0] and "layer" in got.problems[0]
    assert "step 3" in got.problems[1] and "maps" in got.problems[1]
