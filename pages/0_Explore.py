"""normviz · Explore (the default page, at the root URL): one text, several token-to-token maps side by side."""
from pathlib import Path

import streamlit as st

from normviz import viz
from normviz.ui import data
from normviz.ui import st_parts as ui
from normviz.ui.state import load_examples

st.set_page_config(page_title="normviz · Explore", page_icon="🔎", layout="wide")
EXAMPLES = load_examples(Path(__file__).resolve().parents[1] / "assets" / "examples.txt")

def page() -> None:
    view = ui.load_view()
    view = ui.sidebar(view)
    ui.apply_style(view)
    fs = ui.font_size(view)


    def use_example():
        choice = st.session_state.get("w_example")
        if choice is not None:
            st.session_state["w_text"], st.session_state["w_pair"] = EXAMPLES[choice]
            st.session_state["w_focus"] = None


    ui.seed("w_text", view.text)
    ui.seed("w_pair", view.pair)
    c1, c2, c3 = st.columns([5, 3, 2])
    with c1:
        view.text = st.text_input("Text (one or two sentences)", key="w_text", max_chars=ui.settings().max_text_chars)
    with c2:
        view.pair = st.text_input("Second sentence (optional, a pair)", key="w_pair",
                                  max_chars=ui.settings().max_text_chars)
    with c3:
        st.selectbox("Examples", range(len(EXAMPLES)), index=None, key="w_example", on_change=use_example,
                     format_func=lambda i: EXAMPLES[i][0] + (" ‖ " + EXAMPLES[i][1] if EXAMPLES[i][1] else ""),
                     placeholder="Pick an example…")

    ui.save_view(view)
    lm = ui.load_model(view.model)
    if lm is None:
        st.stop()
    ui.show_device(lm)

    available = ui.default_keys(lm) + ui.opt_in_keys(lm)
    if "ff_res_ln" in view.maps and "ff_res_ln" not in available and "ff_res" in available:
        # pre-LN models have no norm after the FF: ff_res is already their whole layer
        view.maps = tuple(dict.fromkeys("ff_res" if k == "ff_res_ln" else k for k in view.maps))
        if "w_maps" in st.session_state:
            st.session_state["w_maps"] = list(dict.fromkeys(
                "ff_res" if k == "ff_res_ln" else k for k in st.session_state["w_maps"]))
    unknown = [k for k in view.maps if k not in available]
    if unknown:
        ui.say("warning", f"Not available for {lm.name}: {', '.join(unknown)}. Available maps: {', '.join(available)}.")

    # --- controls: sidebar (which maps, how) and one row above the panels (where) ------------------------------
    with st.sidebar:
        st.header("Maps")
        ui.seed("w_maps", [k for k in view.maps if k in available] or ui.default_keys(lm)[:3])
        st.session_state["w_maps"] = list(dict.fromkeys(k for k in st.session_state["w_maps"] if k in available))
        view.maps = tuple(st.pills("Shown side by side", available, selection_mode="multi", key="w_maps",
                                   format_func=ui.title))
        ui.seed("w_hide", view.hide_special)
        view.hide_special = st.toggle("Hide special tokens", key="w_hide",
                                      help="Drops [CLS], [SEP], <s>, BOS … and renormalises each row over the rest.")
        ui.seed("w_shared", view.shared_scale)
        view.shared_scale = st.toggle("One colour scale for all panels", key="w_shared")
        ui.seed("w_values", view.values)
        view.values = st.radio("Values", ["share", "raw"], key="w_values", horizontal=True,
                               format_func=lambda v: "row shares" if v == "share" else "raw",
                               help="Row shares: each row divided by its total, so maps with different units compare "
                                    "on one colour scale. Raw: the map's own numbers (weights, vector norms).")

    L, H = lm.n_layers, lm.n_heads
    ui.seed_index("w_layer", view.layer % L if -L <= view.layer < 0 else view.layer, L, "layer")
    st.session_state["w_layer"] = min(max(int(st.session_state["w_layer"]), 0), L - 1)  # after a model change
    head_opts = [-1] + list(range(H))
    if view.head is None:
        ui.seed("w_head", -1)
    ui.seed_index("w_head", view.head, H, "head", fallback=-1, fallback_text="all heads")
    if st.session_state["w_head"] not in head_opts:
        st.session_state["w_head"] = -1
    cl, ch, cf = st.columns([5, 3, 2])
    with cl:
        view.layer = st.slider("Layer", 0, L - 1, key="w_layer")
    with ch:
        h = st.selectbox("Head (per-head maps)", head_opts, key="w_head",
                         format_func=lambda x: "all heads (layer view)" if x < 0 else f"head {x}")
        view.head = None if h < 0 else h
    ui.save_view(view)

    if not view.text.strip():
        st.error("The text is empty. Type a sentence (or two) to analyse, or pick an example.")
        st.stop()

    # --- the heavy part: one cached session per text; each map computed once, layer/head changes only slice ----
    session = ui.session_for(lm, view.text, view.pair)
    if session is None:
        st.stop()
    view.maps = tuple(dict.fromkeys(view.maps))  # a map named twice is shown once
    a = ui.get_maps(session, list(view.maps))
    if a is None:
        st.stop()
    labels = data.unique_labels(list(a.labels))
    for k in view.maps:
        if k in a.refused:
            ui.say("error", f"{ui.title(k)}: {a.refused[k]}")
    if "pair" in a.notes:
        st.caption(ui.plain(f"Sentence pair: {a.notes['pair']}."))
    panels = data.build_panels(a, [k for k in view.maps if k in a], view.layer, view.head, view.hide_special, view.values)

    with cf:  # the focus picker sits in the control row; its bars go below the panels
        positions = panels[0].index if panels else []
        ui.seed_index("w_focus", view.focus, a.n_tokens, "focus", fallback=None, fallback_text="no focus token")
        if st.session_state["w_focus"] not in positions:
            st.session_state["w_focus"] = None
        view.focus = st.selectbox("Focus token (bars)", positions, key="w_focus", index=None,
                                  format_func=lambda i: f"{labels[i]}  [{i}]", placeholder="Pick a token…",
                                  help="Shows that token's row in every chosen map as bars, below the heatmaps.")
    ui.save_view(view)

    if not panels:
        st.info("Choose at least one map in the sidebar.")
        st.stop()
    if view.hide_special and a.special.any():
        hidden = ", ".join(sorted({a.labels[i] for i in range(a.n_tokens) if a.special[i]}))
        ui.say("info", f"Special tokens hidden ({hidden}); each row is renormalised over the tokens that remain"
                + (", keeping its original total." if view.values == "raw" else "."))
    if view.values == "raw" and view.shared_scale and len(panels) > 1:
        st.caption("Raw values of different maps have different units; per-panel scales may read better.")

    ranges = data.color_range(panels, view.shared_scale)
    per_row = 1 if (view.present and len(panels) > 1) else min(2, len(panels))
    cb_title = "share" if view.values == "share" else "value"
    for start in range(0, len(panels), per_row):
        cols = st.columns(per_row)
        for col, p, (lo, hi) in zip(cols, panels[start:start + per_row], ranges[start:start + per_row]):
            with col:
                fig = viz.heatmap(p.matrix, p.row_labels, title=p.title, zmin=lo, zmax=hi, positions=p.index,
                                  font_size=fs, colorbar_title=cb_title, height=680 if view.present else None)
                st.plotly_chart(fig, key=f"panel_{p.key}", config={"displaylogo": False,
                                "toImageButtonOptions": {"format": "png", "filename": f"normviz_{p.key}", "scale": 2}})

    if view.focus is not None:
        rows = data.focus_rows(panels, view.focus)
        fig = viz.bars(rows, labels, [p.index for p in panels if view.focus in p.index],
                       focus_label=f"{labels[view.focus]} [{view.focus}]", font_size=fs)
        st.plotly_chart(fig, key="focus_bars")

    # --- export ----------------------------------------------------------------------------------------------
    st.caption("Export: PNG from the camera icon in each chart's toolbar; the numbers shown above as CSV or NPZ.")
    e1, e2, _ = st.columns([1, 1, 4])
    stem = f"normviz_{lm.name.replace('/', '_')}_L{view.layer}_" + ("all" if view.head is None else f"H{view.head}")
    with e1:
        st.download_button("Download CSV", data.panels_csv(panels), file_name=stem + ".csv", mime="text/csv")
    with e2:
        st.download_button("Download NPZ", data.panels_npz(panels, list(a.tokens)), file_name=stem + ".npz",
                           mime="application/octet-stream")


ui.run_page(page)
