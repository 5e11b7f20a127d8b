"""normviz · Explore (the default page, at the root URL): one text, several token-to-token maps side by side.

The page composes its regions (:mod:`normviz.ui.views.explore`: the controls;
:mod:`normviz.ui.views.explore_panels`: the maps; :mod:`normviz.ui.views.frame`: model, text and session, or a
message and the run stops)."""

from pathlib import Path

import streamlit as st

from normviz.ui.kit import controls, data
from normviz.ui.kit import st_parts as ui
from normviz.ui.kit.state import load_examples
from normviz.ui.views import compare, frame, long_view
from normviz.ui.views import explore as E
from normviz.ui.views import explore_panels as P

ui.page_config("Explore", "🔎")
EXAMPLES = load_examples(Path(__file__).resolve().parents[1] / "assets" / "examples.txt")
# every box that holds a position or a token of the text: dropped for a new text (ui.follow_text)
TEXT_KEYS = ("w_focus",) + long_view.TEXT_KEYS


def page() -> None:
    view, fs = ui.start_page()
    layout = E.draw_text_row(view, EXAMPLES)
    if ui.follow_text(TEXT_KEYS, view.model, view.text, view.pair):
        view.focus = None  # the old text's focus position is not this text's

    ui.save_view(view)
    lm = frame.model(view.model)
    available = ui.default_keys(lm) + ui.opt_in_keys(lm)
    E.follow_the_model(view, lm, available)
    talk_slot, groups = E.draw_sidebar(view, available)  # which maps, how they read, what to put beside them
    head_opts = E.draw_control_row(view, lm, layout)  # where in the model, and how to draw
    ui.save_view(view)
    ui.show_talk_link(talk_slot, view)
    ui.step_note()  # a step's maps this model does not offer: named, never dropped silently
    if view.present:
        ui.step_indicator(view)
        ui.keyboard(
            controls.LAYER_KEY,
            list(range(lm.n_layers)),
            controls.HEAD_KEY,
            head_opts,
            leave=ui.leave_stage,
            on_step=lambda delta: ui.walk_steps(delta, groups),
            focus_key="w_focus",
        )
    frame.text(view.text, "The text is empty. Type a sentence (or two) to analyse, or pick an example.")

    # --- the heavy part: one cached session per text; each map computed once, layer/head changes only slice ----
    session = frame.session(lm, view.text, view.pair)
    if long_view.applies(session):  # > 256 tokens: overviews + zoom window, one layer computed at a time
        long_view.draw(session, lm, view, fs, ui.panel_width(2, view.present), view.present)
        ui.save_view(view)
        return
    view.maps = tuple(dict.fromkeys(view.maps))  # a map named twice is shown once
    a = frame.maps(session, list(view.maps))
    labels = data.unique_labels(list(a.labels))
    for k in view.maps:
        if k in a.refused:
            ui.say("error", f"{ui.title(k)}: {a.refused[k]}")
    if "pair" in a.notes:
        st.caption(ui.plain(f"Sentence pair: {a.notes['pair']}."))
    keys, merged = data.dedupe_all_heads([k for k in view.maps if k in a], view.head)
    panels = data.build_panels(a, keys, view.layer, view.head, view.hide_special, view.values)
    second = None  # (label, analysis, panels, lm) of the comparison
    if view.compare != "none":
        second = compare.comparison(view, lm, keys)
    if not panels:
        st.info("Choose at least one map in the sidebar.")
        st.stop()

    positions = panels[0].index
    E.draw_focus(view, positions, a.n_tokens, labels, layout)  # focus one token in every panel
    ui.save_view(view)
    notes = E.notes(view, a, keys, merged, labels, panels)

    # --- the panels: two per row (or A | B when comparing) ------------------------------------------------------
    boundary = data.pair_boundary(a)
    drawn = P.Panels(view, fs, ui.panel_width(2, view.present), data.view_npz_name(lm.name, view.layer, view.head))
    if second is None:
        drawn.draw_rows(panels, data.color_range(panels, view.shared_scale), session, lm, boundary)
    else:
        drawn.draw_compared(panels, second, session, lm, boundary)
    step_note = E.label_step_note(drawn.figures)
    for n in notes + ([step_note] if step_note else []):  # under the panels, so that they start high on the screen
        st.caption(n)
    # layer/head changes drawn in the browser at once (the rerun then redraws the same from the server); not
    # when a chart that depends on the layer has no frames (lines, comparison, difference, focus bars)
    layer_bound = second is not None or view.draw != "heatmap" or bool(view.diff) or view.focus is not None
    frames = None if layer_bound else ui.instant_frames(a, view, keys, len(positions), lm, session, drawn.strips)
    ui.instant_switch(frames)
    P.draw_under(drawn, a, panels, labels, lm, boundary)
    P.draw_export(drawn, a, panels, lm)


ui.run_page(page)
