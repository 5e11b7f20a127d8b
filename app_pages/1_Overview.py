"""normviz · Overview: every layer and head of one map at once, and which heads are "no-op" heads."""
import numpy as np
import pandas as pd
import streamlit as st

from normviz import viz
from normviz.ui.kit import data
from normviz.ui.kit import st_parts as ui
from normviz.ui.views import overview_maps, overview_zoom

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
    lm = ui.load_model(view.model)
    if lm is None:
        st.stop()
    ui.show_device(lm)
    if not view.text.strip():
        st.error("The text is empty. Type a sentence (or two) to analyse.")
        st.stop()

    keys = ui.default_keys(lm) + ui.opt_in_keys(lm)
    c1, c2 = bar[1:] if bar else st.columns(2)
    with c1:
        if "w_ov_map" not in st.session_state and view.overview_map not in keys:
            ui.say("warning", f"The link's overview_map={view.overview_map!r} is not a map of {lm.name}; showing {keys[0]}.")
        ui.seed("w_ov_map", view.overview_map if view.overview_map in keys else keys[0])
        view.overview_map = st.selectbox("Map", keys, key="w_ov_map", format_func=ui.title)
    with c2:
        compare_opts = ["(none)"] + keys
        if "w_ov_compare" not in st.session_state and view.overview_compare not in keys + ["(none)"]:
            ui.say("warning", f"The link's overview_compare={view.overview_compare!r} is not a map of {lm.name}; "
                              "comparing with none.")
        ui.seed("w_ov_compare", view.overview_compare if view.overview_compare in keys else "(none)")
        view.overview_compare = st.selectbox("Compare with", compare_opts, key="w_ov_compare",
                                             format_func=lambda k: k if k == "(none)" else ui.title(k))
    ui.save_view(view)

    session = ui.session_for(lm, view.text, view.pair)
    if session is None:
        st.stop()
    shown = [k for k in dict.fromkeys((view.overview_map, view.overview_compare)) if k in keys]  # same map: once
    if view.overview_compare == view.overview_map:
        st.caption("Map and Compare are the same map; it is shown once.")
    # one layer at a time (ui.overview_maps): the grids keep the first m tokens of each layer, the per-head
    # summary one number per head; the whole [L, H, n, n] arrays are never made
    m = overview_maps.grid_tokens(session, shown)
    summary = [k for k in ("attention", "norm") if k in ui.known_keys(lm)]
    summary = summary if len(summary) == 2 and all(len(session.array_shape(k)) == 4 for k in summary) else []
    sink, sink_name = overview_maps.sink_of(session, lm.is_causal)
    stacks, shares = layer_by_layer(session, shown, m, summary, sink if sink.any() else None)
    if not stacks:
        st.stop()
    shown = [k for k in shown if k in stacks]
    labels = data.unique_labels(list(session.labels))
    if m < session.n_tokens:
        st.info(f"The grid shows the first {m} of {session.n_tokens} tokens so the page stays responsive.")
    if not view.present:
        st.caption("Each small square is one head's map (rows receive, columns contribute); one colour scale per "
                   "grid. Hover a cell for layer, head and token pair; click a square to open that head on Explore, "
                   "or pick one below to see it large, with its tokens.")
    if len(shown) == 1:
        grid_cols = st.columns([3, 2], gap="medium")
        places = [grid_cols[0]]
    else:  # stage mode: the two grids side by side on the first screen; else one per row, each square larger
        grid_cols = st.columns(2, gap="medium") if view.present else [st.container()]
        places = grid_cols if view.present else grid_cols * len(shown)
    heads_shown = {}
    for k, place in zip(shown, places):
        with place:
            s = stacks[k][:, :, :m, :m]
            heads = None if s.shape[1] > 1 else ["layer"]
            hint = (1100 if not view.present or len(shown) == 1 else 640) if s.shape[1] > 1 else 300
            tall = None
            if view.present:  # the measured column and the window: both grids whole on the first screen
                w, h = ui.screen()
                if w and s.shape[1] > 1 and len(shown) > 1:  # a column's width (not capped by the height)
                    hint = max(hint, ui.panel_width(2, False))
                tall = max(360, h - 170) if h else None
            fig = viz.grid(s, labels[:m], title=f"{ui.title(k)}\n{ui.context_text(lm.name, view.text, 50, sep=': ')}",
                           font_size=fs, head_names=heads, width_hint=hint, colorbar_title=data.unit(k, "raw"),
                           max_height=tall)
            ui.chart(fig, key=f"grid_{k}", filename=f"normviz_overview_{k}")
            heads_shown[f"grid_{k}"] = s.shape[1]
    clicked = ui.grid_clicks(heads_shown, m + 1)
    if clicked is not None:  # a square of a grid: that head on Explore
        from dataclasses import replace

        view = replace(view, layer=clicked["layer"], head=clicked["head"] if clicked["head"] is not None else view.head)
        ui.save_view(view)
        st.switch_page("app_pages/0_Explore.py", query_params=view.to_query())
    with grid_cols[-1] if len(shown) == 1 else st.container():
        zoom_head(view, lm, session, shown, labels, fs)

    st.download_button("Download the grids' numbers (NPZ)",
                       data.stacks_npz({k: stacks[k][:, :, :m, :m] for k in shown}, list(session.tokens[:m])),
                       file_name=f"normviz_overview_{lm.name.replace('/', '_')}.npz", mime="application/octet-stream")

    st.subheader("Which heads are no-op heads?")
    if summary:
        if not sink.any():
            st.info("This text has no special tokens, so there is no share to compare.")
        elif len(shares) == 2:
            wa, wn = shares["attention"], shares["norm"]
            st.caption(f"Share of each head's attention weight that lands on {ui.plain(sink_name)}, against the share of its "
                       "norm ‖α f(x)‖. Heads far below the diagonal attend there but move little: their weight says "
                       "more than their effect.")
            left, right = st.columns([1, 1])
            with left:
                st.plotly_chart(ui.themed(viz.special_share_scatter(wa, wn, "attention weight", "norm", font_size=fs)),
                                key="noop_scatter")
            with right:
                L, H = wa.shape
                table = pd.DataFrame({
                    "layer": np.repeat(np.arange(L), H), "head": np.tile(np.arange(H), L),
                    "weight → special": wa.ravel().round(3), "norm → special": wn.ravel().round(3),
                })
                table["gap"] = (table["weight → special"] - table["norm → special"]).round(3)
                top = table.sort_values("gap", ascending=False).head(12)
                top["open"] = [explore_url(view, int(r.layer), int(r.head)) for r in top.itertuples()]
                st.dataframe(top, hide_index=True, width="stretch", column_config={
                    "layer": st.column_config.NumberColumn("layer", width="small"),
                    "head": st.column_config.NumberColumn("head", width="small"),
                    "open": st.column_config.LinkColumn("open", display_text="Explore ↗", width="small",
                                                        help="This head on the Explore page (same text)")})
                st.download_button("Per-head summary (CSV)", table.to_csv(index=False).encode(),
                                   file_name="normviz_heads_special_share.csv", mime="text/csv")
        elif sink.any():
            st.info("The per-head summary needs the attention and norm maps (refused above).")
    else:
        st.info("The per-head summary needs the attention and norm maps.")


def layer_by_layer(session, shown, m, summary, sink):
    """The grids and the per-head shares (``ui.overview_maps.overview``: one layer at a time) with a progress
    bar, within the server's memory budget; a refused key (its cost for one layer, an error) is said."""
    from normviz.core.errors import NormvizError
    from normviz.ui.kit.fetch import admitted

    bar = st.empty()
    prog = bar.progress(0.0, text="Computing the maps one layer at a time…")
    try:
        with admitted(session, overview_maps.layer_bytes(session, list(dict.fromkeys(shown + summary))),
                      what="this overview"):
            stacks, shares, refused = overview_maps.overview(
                session, shown, m, summary, sink,
                lambda f, msg: prog.progress(min(1.0, f), text=f"Computing the maps: {msg}"))
    except NormvizError as exc:  # the server's memory budget
        ui.say("error", ui.shorten_error(exc, 600))
        return {}, {}
    finally:
        bar.empty()
    for k, why in refused.items():
        ui.say("error", f"{ui.title(k)}: {ui.shorten_error(why, 600)}")
    return stacks, shares


def explore_url(view, layer: int, head: int) -> str:
    """A relative link to Explore showing ``layer``/``head`` of this view (every value percent-encoded)."""
    from dataclasses import replace
    from urllib.parse import urlencode

    return "./?" + urlencode(replace(view, layer=layer, head=head).to_query())


@st.fragment
def zoom_head(view, lm, session, shown, labels, fs) -> None:
    """One head of the grid, large and with its token labels, and a link that opens it on Explore. A fragment:
    a zoom click reruns (and resends) this panel only, not the grids beside it (18.6 MB a click on smollm2)."""
    st.markdown("**Zoom into a head**")
    L, H = lm.n_layers, lm.n_heads
    ui.seed_index("w_ov_layer", view.layer % L if -L <= view.layer < 0 else view.layer, L, "layer")
    ui.seed("w_ov_head", view.head if view.head is not None and 0 <= view.head < H else 0)
    if st.session_state["w_ov_head"] not in range(H):
        st.session_state["w_ov_head"] = 0
    c1, c2 = st.columns(2)
    with c1:
        view.layer = st.number_input("Layer", 0, L - 1, key="w_ov_layer")
    with c2:
        head = st.number_input("Head", 0, H - 1, key="w_ov_head")
    per_head = [k for k in shown if len(session.array_shape(k)) == 4]
    view.head = int(head) if per_head else view.head
    ui.save_view(view)
    k = shown[0]
    one = int(head) if len(session.array_shape(k)) == 4 else None
    main = ui.main_width()  # the zoom's column: 2/5 of the page beside one grid, else the page
    width = None if main is None else (int(main * 2 / 5) - 16 if len(shown) == 1 else min(main, 760))
    overview_zoom.draw(session, lm, k, int(view.layer), one, labels, fs, width, view.present,  # bounded at any n
                       data.pair_boundary(_Axis(session)), f"normviz_L{view.layer}_H{head}_{k}")
    ui.link_to_page("app_pages/0_Explore.py", f"Open layer {view.layer}, head {head} in Explore", {})


class _Axis:
    """What ``data.pair_boundary`` reads of a session (its pair and special tokens)."""

    def __init__(self, session):
        self.text_pair, self.special = session.text_pair, np.asarray(session.encoded.special, bool)


ui.run_page(page)
