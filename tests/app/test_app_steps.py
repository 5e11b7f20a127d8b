"""A talk's steps on Explore: save the view as a named step, the list travels in the URL, going to a step sets
the layer, head and maps again."""

from __future__ import annotations

from ..helpers.app import app, no_exception


def test_save_steps_then_go_back_to_one(at):
    at.slider(key="w_layer").set_value(2).run()
    at.sidebar.text_input(key="w_step_name").input("Layer two").run()
    at.sidebar.button(key="w_step_save").click().run()
    no_exception(at)
    at.slider(key="w_layer").set_value(4).run()
    at.selectbox(key="w_head").set_value(3).run()
    at.sidebar.button(key="w_step_save").click().run()  # unnamed: "step 2"
    no_exception(at)
    steps = at.query_params["steps"]
    steps = steps[-1] if isinstance(steps, list) else steps
    assert steps == "Layer two~2~all~attention+norm+attn_res+attn_res_ln;step 2~4~3~attention+norm+attn_res+attn_res_ln"
    at.sidebar.radio(key="w_step_go").set_value(0).run()
    no_exception(at)
    assert at.slider(key="w_layer").value == 2 and at.selectbox(key="w_head").value == -1


def test_a_link_with_steps_lists_them():
    at = app(query={"steps": "Weights~0~all~attention;Norms~3~1~norm"})
    at.run()
    no_exception(at)
    go = at.sidebar.radio(key="w_step_go")
    assert go.options == ["1. Weights", "2. Norms"]
    go.set_value(1).run()
    no_exception(at)
    assert at.slider(key="w_layer").value == 3 and at.selectbox(key="w_head").value == 1
    assert at.session_state["w_maps"] == ["norm"]


def test_a_steps_maps_the_model_does_not_offer_are_named_with_the_reason_not_dropped_silently():
    """Going to a step kept only the maps the picker offers; the others vanished (issue 29). Now a warning
    names each one and why, says what is shown instead, and stays while that step is on screen."""
    from ..helpers.app import texts

    steps = "Weights~0~all~attention+norm;Odd~3~1~norm+alti_ln+decoder_norm+no_such_map"
    at = app(query={"steps": steps})
    at.run()
    no_exception(at)
    at.sidebar.radio(key="w_step_go").set_value(1).run()
    no_exception(at)
    assert at.session_state["w_maps"] == ["norm"] and at.slider(key="w_layer").value == 3
    notes = [w for w in texts(at.warning) if "Step 2 (Odd)" in w]
    assert len(notes) == 1, texts(at.warning)
    note = notes[0]
    assert "minilm does not offer" in note and "Shown: norm." in note
    assert "alti_ln: a map of pre-LN models only" in note
    assert "decoder_norm: an encoder–decoder's map" in note and "no_such_map: no map has this name" in note
    assert not [w for w in texts(at.warning) if w.startswith("Not available")]  # one message, not two
    at.slider(key="w_layer").set_value(4).run()  # still the step's view: the note stays
    no_exception(at)
    assert [w for w in texts(at.warning) if "Step 2 (Odd)" in w]
    at.sidebar.radio(key="w_step_go").set_value(0).run()  # a step whose maps are all offered: no note
    no_exception(at)
    assert not [w for w in texts(at.warning) if "left out" in w] and at.session_state["w_maps"] == ["attention", "norm"]
