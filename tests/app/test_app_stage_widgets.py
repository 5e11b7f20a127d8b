"""Issue 42 item 2: entering or leaving stage mode sets a page's widget values again (so the browser is sent them
with the moved widgets), but never a widget whose value Streamlit refuses to take through session state: a button,
a download button, an upload, a chart's or a data editor's selection. On 4c42c33 the Why page's graph download
(``w_why_graph_dl``) raised StreamlitValueAssignmentNotAllowedError after Esc."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _script():
    import pandas as pd
    import plotly.graph_objects as go
    import streamlit as st

    from normviz.ui.kit.page import keep_widgets_across_stage

    present = st.toggle("Stage", key="w_present")
    keep_widgets_across_stage(present)
    st.button("Button", key="w_button")
    st.download_button("Download", "data", file_name="x.txt", key="w_download")
    st.file_uploader("Upload", key="w_upload")
    st.file_uploader("Uploads", key="w_uploads", accept_multiple_files=True)
    st.data_editor(pd.DataFrame({"a": [1, 2]}), key="w_editor")
    st.plotly_chart(go.Figure(go.Bar(y=[1, 2])), key="w_chart", on_select="rerun")
    st.text_input("Text", "typed", key="w_text")
    st.selectbox("Pick", [1, 2, 3], index=2, key="w_pick")
    st.multiselect("Many", ["a", "b"], default=["b"], key="w_many")
    st.slider("Layer", 0, 5, 3, key="w_layer")


def test_stage_on_off_leaves_read_only_widgets_alone():
    at = AppTest.from_function(_script, default_timeout=60)
    at.run()
    assert not at.exception
    at.text_input(key="w_text").set_value("kept")
    at.button(key="w_button").click()
    at.run()
    for present in (True, False, True, False):
        at.toggle(key="w_present").set_value(present)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        # the settable ones keep their values through the move
        assert at.text_input(key="w_text").value == "kept"
        assert at.selectbox(key="w_pick").value == 3
        assert at.multiselect(key="w_many").value == ["b"]
        assert at.slider(key="w_layer").value == 3


def test_settable_judges_by_streamlits_own_record():
    """The rule names no key: a button's value (a bool, like a checkbox's) is refused by what Streamlit records
    for its widget, not by its name."""
    at = AppTest.from_function(_script, default_timeout=60)
    at.run()
    assert not at.exception
    assert at.session_state["w_button"] is False  # a plain bool, yet not settable
    at.toggle(key="w_present").set_value(True)
    at.run()
    assert not at.exception
