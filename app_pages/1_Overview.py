"""normviz · Overview: every layer and head of one map at once, and which heads are "no-op" heads. The page
composes its regions (:mod:`normviz.ui.views.head_grids`; the numbers: :mod:`normviz.ui.views.overview_maps`)."""

import streamlit as st

from normviz.ui.kit import data
from normviz.ui.kit import st_parts as ui
from normviz.ui.views import frame, overview_maps
from normviz.ui.views import head_grids as G

ui.page_config("Overview", "🧭")
TEXT_KEYS = ()  # no box here holds a position or a token of the text (ui.follow_text; tested for every page)


def page() -> None:
    view, fs = ui.start_page()
    ui.escape_key(view.present)  # Esc leaves stage mode (this page has no layer/head keys)

    if not view.present:  # stage mode: the controls in one compact bar, the grids right under it
        st.subheader("Overview: every layer and head at once")
    bar = st.columns([4, 2, 2], vertical_alignment="bottom") if view.present else None
    with bar[0] if bar else st.container():
        view.text = ui.text_box("Text", "w_text", view.text, max_chars=ui.settings().max_text_chars)
    ui.follow_text(TEXT_KEYS, view.model, view.text, view.pair)
    if view.pair.strip():
        st.caption("Second sentence (set on Explore): " + ui.plain(view.pair))
    ui.save_view(view)
    lm = frame.model(view.model)
    frame.text(view.text, "The text is empty. Type a sentence (or two) to analyse.")

    keys = ui.default_keys(lm) + ui.opt_in_keys(lm)
    G.draw_controls(view, lm, bar, keys)
    ui.save_view(view)

    session = frame.session(lm, view.text, view.pair)
    shown = [k for k in dict.fromkeys((view.overview_map, view.overview_compare)) if k in keys]  # same map: once
    if view.overview_compare == view.overview_map:
        st.caption("Map and Compare are the same map; it is shown once.")
    # one layer at a time (ui.overview_maps): the grids keep the first m tokens of each layer, the per-head
    # summary one number per head; the whole [L, H, n, n] arrays are never made
    m = overview_maps.grid_tokens(session, shown)
    summary = [k for k in ("attention", "norm") if k in ui.known_keys(lm)]
    summary = summary if len(summary) == 2 and all(len(session.array_shape(k)) == 4 for k in summary) else []
    sink, sink_name = overview_maps.sink_of(session, lm.is_causal)
    stacks, shares = G.layer_by_layer(session, shown, m, summary, sink if sink.any() else None)
    if not stacks:
        st.stop()
    shown = [k for k in shown if k in stacks]
    labels = data.unique_labels(list(session.labels))
    if m < session.n_tokens:
        st.info(f"The grid shows the first {m} of {session.n_tokens} tokens so the page stays responsive.")
    if not view.present:
        st.caption(
            "Each small square is one head's map (rows receive, columns contribute); one colour scale per "
            "grid. Hover a cell for layer, head and token pair; click a square to open that head on Explore, "
            "or pick one below to see it large, with its tokens."
        )
    grid_cols = G.draw_grids(view, lm, session, shown, stacks, m, labels, fs)
    with grid_cols[-1] if len(shown) == 1 else st.container():
        G.zoom_head(view, lm, session, shown, labels, fs)

    st.download_button(
        "Download the grids' numbers (NPZ)",
        data.stacks_npz({k: stacks[k][:, :, :m, :m] for k in shown}, list(session.tokens[:m])),
        file_name=f"normviz_overview_{lm.name.replace('/', '_')}.npz",
        mime="application/octet-stream",
    )
    G.draw_noop_heads(view, summary, sink, sink_name, shares, fs)


ui.run_page(page)
