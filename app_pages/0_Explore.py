"""normviz · Explore (the default page, at the root URL): one text, several token-to-token maps side by side."""
from pathlib import Path

import streamlit as st

from normviz import viz
from normviz.ui.kit import controls, data
from normviz.ui.kit import st_parts as ui
from normviz.ui.kit.frames import frame_name as frames_name
from normviz.ui.kit.state import COMPARE_MODES, DEFAULT_MAPS, load_examples
from normviz.ui.views import compare, learn, long_view
from normviz.viz.labels import ordinal

ui.page_config("Explore", "🔎")
EXAMPLES = load_examples(Path(__file__).resolve().parents[1] / "assets" / "examples.txt")
NONE = "(none)"
FOCUS_PILLS = 24  # longer texts pick the focus token in a searchable select
# every box that holds a position or a token of the text: dropped for a new text (ui.follow_text)
TEXT_KEYS = ("w_focus",) + long_view.TEXT_KEYS


def page() -> None:
    view, fs = ui.start_page()

    def use_example():
        choice = st.session_state.get("w_example")
        if choice is not None:
            st.session_state["w_text"], st.session_state["w_pair"] = EXAMPLES[choice]
            st.session_state["w_focus"] = None

    def use_file():
        up = st.session_state.get("w_upload")
        if up is None:
            return
        limit = ui.settings()
        text, notes = data.uploaded_text(up.name, up.getvalue(), int(limit.max_upload_mb * 2**20),
                                         limit.max_text_chars)
        st.session_state["_normviz_upload_notes"] = notes
        if text is not None:
            st.session_state["w_text"], st.session_state["w_pair"] = text, ""
            st.session_state["w_focus"] = None

    if view.present:  # stage mode: one compact bar (text, layer, head, focus; the rest behind ⋯)
        bar = st.columns([5, 3, 2, 3, 1], vertical_alignment="bottom")
        c1 = bar[0]
        c2 = c3 = more = bar[4].popover("⋯", help="More controls: second sentence, examples, view, threshold")
    else:
        c1, c2, c3 = st.columns([5, 3, 2])
    with c1:
        view.text = ui.text_box("Text (one or two sentences)", "w_text", view.text, max_chars=ui.settings().max_text_chars)
    with c2:
        view.pair = ui.text_box("Second sentence (optional, a pair)", "w_pair", view.pair,
                                max_chars=ui.settings().max_text_chars)
    with c3:
        st.selectbox("Examples", range(len(EXAMPLES)), index=None, key="w_example", on_change=use_example,
                     format_func=lambda i: EXAMPLES[i][0] + (" ‖ " + EXAMPLES[i][1] if EXAMPLES[i][1] else ""),
                     placeholder="Pick an example…")
    with more if view.present else st.expander("A long text from a file (.txt)"):
        st.file_uploader(f"Text file (UTF-8, at most {ui.settings().max_upload_mb:g} MB): its text goes into the "
                         f"text box, cut at {ui.settings().max_text_chars:,} characters and {ui.settings().max_tokens} tokens",
                         type=["txt", "md"], key="w_upload", on_change=use_file)
    for note in st.session_state.pop("_normviz_upload_notes", []):
        ui.say("warning", note)
    if ui.follow_text(TEXT_KEYS, view.model, view.text, view.pair):
        view.focus = None  # the old text's focus position is not this text's

    ui.save_view(view)
    lm = ui.load_model(view.model)
    if lm is None:
        st.stop()
    ui.show_device(lm)

    available = ui.default_keys(lm) + ui.opt_in_keys(lm)
    if view.steps and "_normviz_step" not in st.session_state:  # a talk link opens on its first step (its layer,
        ui.go_to_step(0, data.grouped(available))  # head and maps), not on the link's view until the first PageDown
    if "ff_res_ln" in view.maps and "ff_res_ln" not in available and "ff_res" in available:
        # pre-LN models have no norm after the FF: ff_res is already their whole layer
        view.maps = tuple(dict.fromkeys("ff_res" if k == "ff_res_ln" else k for k in view.maps))
        if "w_maps" in st.session_state:
            st.session_state["w_maps"] = list(dict.fromkeys(
                "ff_res" if k == "ff_res_ln" else k for k in st.session_state["w_maps"]))
    unknown = [k for k in view.maps if k not in available]
    if unknown and not lm.note:  # a model without an architecture row: its one note (show_device) says why
        ui.say("warning", f"Not available for {lm.name}: {', '.join(unknown)}. Available maps: {', '.join(available)}.")

    # --- sidebar: which maps, how they read, what to put beside them ------------------------------------------
    with st.sidebar:
        st.header("Maps")
        head_now = st.session_state.get(controls.HEAD_KEY, controls.ALL_HEADS if view.head is None else view.head)
        view.maps = ui.map_picker(view.maps, available, list(DEFAULT_MAPS), all_heads=head_now == controls.ALL_HEADS)
        ui.seed("w_hide", view.hide_special)
        view.hide_special = st.toggle("Hide special tokens", key="w_hide",
                                      help="Drops [CLS], [SEP], <s>, BOS … and renormalises each row over the rest.")
        ui.seed("w_shared", view.shared_scale)
        view.shared_scale = st.toggle("Shared colour scales", key="w_shared", help=data.SHARED_SCALE_HELP)
        ui.seed("w_values", view.values)
        view.values = st.radio("Values", ["share", "raw"], key="w_values", horizontal=True,
                               format_func=lambda v: "row shares" if v == "share" else "raw",
                               help="Row shares: each row divided by its total, so maps with different units compare "
                                    "on one colour scale. Raw: the map's own numbers (weights, vector norms).")
        ui.seed("w_fx", view.fx)
        view.fx = st.toggle("‖f(x)‖ strip under norm panels", key="w_fx",
                            help="The length of each token's transformed vector: ‖α f(x)‖ = α · ‖f(x)‖, so a long "
                                 "bar lets a small weight move a lot.")
        st.header("Beside the maps")
        shown_opts = list(view.maps)
        diff_a = view.diff[0] if len(view.diff) == 2 and view.diff[0] in shown_opts else NONE
        diff_b = view.diff[1] if len(view.diff) == 2 and view.diff[1] in shown_opts else NONE
        if view.diff and (diff_a == NONE or diff_b == NONE) and "w_diff_a" not in st.session_state:
            ui.say("warning", f"The link's diff={','.join(view.diff)} names maps that are not shown; no difference panel.")
        ui.seed("w_diff_a", diff_a)
        ui.seed("w_diff_b", diff_b)
        for k in ("w_diff_a", "w_diff_b"):
            if st.session_state[k] not in [NONE] + shown_opts:
                st.session_state[k] = NONE
        d1, d2 = st.columns(2)
        with d1:
            a_key = st.selectbox("Difference: A", [NONE] + shown_opts, key="w_diff_a", format_func=_label)
        with d2:
            b_key = st.selectbox("minus B", [NONE] + shown_opts, key="w_diff_b", format_func=_label)
        view.diff = (a_key, b_key) if NONE not in (a_key, b_key) and a_key != b_key else ()
        if NONE not in (a_key, b_key) and a_key == b_key:
            st.caption("A and B are the same map: pick two different ones.")
        if view.player and view.player not in shown_opts and "w_player" not in st.session_state:
            ui.say("warning", f"The link's player={view.player} is not a shown map ({', '.join(shown_opts) or 'none'}); "
                              "no layer player. Pick one under 'Beside the maps'.")
        ui.seed("w_player", view.player if view.player in shown_opts else NONE)
        if st.session_state["w_player"] not in [NONE] + shown_opts:
            st.session_state["w_player"] = NONE
        p = st.selectbox("Layer player: animate a map through the layers", [NONE] + shown_opts, key="w_player",
                         format_func=_label)
        view.player = "" if p == NONE else p
        ui.seed("w_compare", view.compare)
        view.compare = st.radio("Compare side by side with", COMPARE_MODES, key="w_compare", horizontal=True,
                                format_func=lambda c: {"none": "nothing", "text": "a 2nd text",
                                                       "model": "a 2nd model"}[c])
        if view.compare == "text":
            view.text_b = ui.text_box("Second text", "w_text_b", view.text_b, max_chars=ui.settings().max_text_chars,
                                      placeholder="Same layer, head and maps")
        elif view.compare == "model":
            view.model_b = ui.second_model_picker(view.model_b, view.model)
        st.radio("Chart downloads (camera icon)", ["png", "svg"], key="w_img", horizontal=True,
                 format_func=str.upper, help="SVG for papers and slides; PNG at twice the screen resolution.")
        st.header("Steps (a talk as one link)")
        groups = data.grouped(available)
        talk_slot = ui.step_controls(view, groups)

    # --- the control row: where in the model, and how to draw ---------------------------------------------------
    L, H = lm.n_layers, lm.n_heads
    LAYER, HEAD, ALL = controls.LAYER_KEY, controls.HEAD_KEY, controls.ALL_HEADS  # watched by instant switching
    ui.seed_index(LAYER, view.layer % L if -L <= view.layer < 0 else view.layer, L, "layer")
    st.session_state[LAYER] = min(max(int(st.session_state[LAYER]), 0), L - 1)  # after a model change
    head_opts = [ALL] + list(range(H))
    if view.head is None:
        ui.seed(HEAD, ALL)
    ui.seed_index(HEAD, view.head, H, "head", fallback=ALL, fallback_text=controls.head_option(ALL))
    if st.session_state[HEAD] not in head_opts:
        st.session_state[HEAD] = ALL
    cl, ch, cd, ct = (bar[1], bar[2], more, more) if view.present else st.columns([4, 2, 2, 2])
    with cl:
        view.layer = st.slider("Layer", 0, L - 1, key=LAYER)
    with ch:
        h = st.selectbox("Head" if view.present else "Head (per-head maps)", head_opts, key=HEAD,
                         format_func=controls.head_option,
                         help="Per-head maps (α, ‖α f(x)‖, effective α) of one head, or of all heads at once "
                              "(α averaged; ‖α f(x)‖ of the heads' vectors summed). Layer-level maps ignore it.")
        view.head = None if h == ALL else h
    with cd:
        ui.seed("w_draw", view.draw)
        view.draw = st.segmented_control("View", ["heatmap", "lines"], key="w_draw", required=True,
                                         format_func=str.capitalize,
                                         help="Heatmap: a cell per token pair. Lines: the tokens in two columns, "
                                              "joined by lines as thick as the contribution (hover a token).")
        view.draw = view.draw or "heatmap"
    with ct:
        ui.seed("w_threshold", view.threshold)
        view.threshold = st.slider("Hide below", 0.0, 0.9, step=0.05, key="w_threshold", format="%.2f",
                                   help="Hides cells (and lines) smaller than this share of the panel's largest value.")
    ui.save_view(view)
    ui.show_talk_link(talk_slot, view)
    ui.step_note()  # a step's maps this model does not offer: named, never dropped silently
    if view.present:
        ui.step_indicator(view)
        ui.keyboard(LAYER, list(range(L)), HEAD, head_opts, leave=ui.leave_stage,
                    on_step=lambda delta: ui.walk_steps(delta, groups), focus_key="w_focus")

    if not view.text.strip():
        st.error("The text is empty. Type a sentence (or two) to analyse, or pick an example.")
        st.stop()

    # --- the heavy part: one cached session per text; each map computed once, layer/head changes only slice ----
    session = ui.session_for(lm, view.text, view.pair)
    if session is None:
        st.stop()
    if long_view.applies(session):  # > 256 tokens: overviews + zoom window, one layer computed at a time
        long_view.draw(session, lm, view, fs, ui.panel_width(2, view.present), view.present)
        ui.save_view(view)
        return
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
    keys, merged = data.dedupe_all_heads([k for k in view.maps if k in a], view.head)
    panels = data.build_panels(a, keys, view.layer, view.head, view.hide_special, view.values)

    second = None  # (label, analysis, panels, lm) of the comparison
    if view.compare != "none":
        second = compare.comparison(view, lm, keys)

    if not panels:
        st.info("Choose at least one map in the sidebar.")
        st.stop()

    # --- a row of token buttons: focus one token in every panel ---------------------------------------------
    positions = panels[0].index
    ui.seed_index("w_focus", view.focus, a.n_tokens, "focus", fallback=None, fallback_text="no focus token")
    if st.session_state["w_focus"] not in positions:
        st.session_state["w_focus"] = None
    focus_help = "Its row and column are outlined in every panel; its row also as bars below."
    if view.present or len(positions) > FOCUS_PILLS:  # a searchable select: a row of 100 buttons fills the screen
        with bar[3] if view.present else st.container():
            view.focus = st.selectbox("Focus a token", [None] + positions, key="w_focus", help=focus_help,
                                      placeholder="no token" if view.present else "no token (type to search)",
                                      format_func=lambda i: "no token" if i is None else f"{labels[i]} [{i}]")
    else:
        view.focus = st.pills(f"Focus a token ({focus_help[0].lower()}{focus_help[1:-1]})", positions, key="w_focus",
                              format_func=lambda i: labels[i])
    ui.save_view(view)

    notes = [n for n in (data.all_heads_note(keys, view.head), merged) if n]
    if any("·" in lab for lab in labels):
        notes.append("A token that occurs again is marked ·2, ·3 … (its 2nd, 3rd occurrence); the hover shows its position.")
    if view.hide_special and a.special.any():
        hidden = ", ".join(sorted({a.labels[i] for i in range(a.n_tokens) if a.special[i]}))
        ui.say("info", f"Special tokens hidden ({hidden}); each row is renormalised over the tokens that remain"
                + (", keeping its original total." if view.values == "raw" else "."))
    if view.shared_scale and len({data.scale_group(p.key) for p in panels}) > 1:
        notes.append(data.SCALE_NOTE)
    if view.values == "raw" and view.shared_scale and len(panels) > 1:
        notes.append("Raw values of different maps have different units; per-panel scales may read better.")

    # --- the panels: two per row (or A | B when comparing) ------------------------------------------------------
    boundary = data.pair_boundary(a)
    ranges = data.color_range(panels, view.shared_scale)
    stem = data.view_npz_name(lm.name, view.layer, view.head)
    figures, captions = [], []
    strips: dict[str, list[int]] = {}  # fx strips drawn: key → shown positions
    frame = frames_name(view.layer, view.head)
    width = ui.panel_width(2, view.present)  # two per row at any width (one panel: the left half)

    def draw(p, rng, sess, model, tag: str, bound, layer: int, head):
        if view.draw == "lines":
            fig = viz.lines(p.matrix, p.row_labels, positions=p.index, threshold=view.threshold, focus=view.focus,
                            title=p.title, font_size=fs, present=view.present, boundary=bound,
                            height=width, width=width)
        else:
            fig = viz.heatmap(data.thresholded(p.matrix, view.threshold), p.row_labels, title=p.title,
                              zmin=rng[0], zmax=rng[1], positions=p.index, font_size=fs,
                              colorbar_title=data.unit(p.key, view.values), causal=model.is_causal, boundary=bound,
                              present=view.present, width=width)
            if view.focus is not None and view.focus in p.index:
                ui.outline_token(fig, p.index.index(view.focus), len(p.index))
            if tag == "":
                fig.layout.meta = {**(fig.layout.meta or {}), "frame": frame}  # what instant switching reads
        ui.context_line(fig, model.name, sess.text, fs)  # a PNG of the panel names its model and text
        ui.chart(fig, key=f"panel_{tag}{p.key}", filename=f"{stem}_{p.key}")
        figures.append(fig)
        captions.append(learn.caption(p.key))
        st.caption(ui.plain(learn.caption(p.key), None))
        if tag == "":
            ui.learn_link(p.key, "What is this?")
        norms = ui.fx_norms(sess, layer) if view.fx and p.key in ("norm", "norm_layer") else None
        if norms is not None:
            vals, what = data.fx_strip(norms, head, p.index)
            strip = viz.fx_strip(vals, p.row_labels, positions=p.index, title=what, font_size=fs, present=view.present,
                                 width=width)
            if tag == "":
                strip.layout.meta = {**(strip.layout.meta or {}), "frame": frame}
                strips[p.key] = list(p.index)
            ui.chart(strip, key=f"fx_{tag}{p.key}", filename=f"{stem}_fx")
            figures.append(strip)
            captions.append("‖f(x_j)‖: the length of each token's transformed vector (vector units).")

    if second is None:
        per_row = 2
        pair = data.weights_norm_pair(panels)
        for start in range(0, len(panels), per_row):
            cols = st.columns(per_row, gap="medium")
            row = panels[start:start + per_row]
            for col, p, rng in zip(cols, row, ranges[start:start + per_row]):
                with col:
                    draw(p, rng, session, lm, "", boundary, view.layer, view.head)
            drawn = {p.key for p in panels[:start + per_row]}
            if pair and {pair[0].key, pair[1].key} <= drawn:  # under the row that completes the pair
                worst = data.largest_difference(*pair)
                if worst is not None:
                    name_b = "‖Σαf‖" if pair[1].key == "norm_layer" else "‖αf‖"
                    st.caption(ui.plain(data.callout_text(worst, "α", name_b), None), help=data.CALLOUT_HELP)
                pair = None
    else:
        name_b, b, panels_b, lm_b, session_b = second
        st.caption(ui.plain(f"Left: {lm.name} on the text above. Right: {name_b}. Same maps, layer and head; "
                         "one colour scale for each map across both sides.", None))
        ranges, ranges_b = data.compared_ranges(panels, panels_b, view.shared_scale)  # one colour scale per map
        by_key = {p.key: (p, r) for p, r in zip(panels_b, ranges_b)}
        for p, rng in zip(panels, ranges):
            left, right = st.columns(2, gap="medium")
            with left:
                draw(p, rng, session, lm, "", boundary, view.layer, view.head)
            with right:
                if p.key in by_key:
                    draw(by_key[p.key][0], by_key[p.key][1], session_b, lm_b, "b_", data.pair_boundary(b),
                         min(view.layer, lm_b.n_layers - 1), ui.clamp_head(view.head, lm_b))
                else:
                    st.info(ui.plain(f"{ui.title(p.key)} is not available for {name_b}.", None))

    step = max((int((f.layout.meta or {}).get("label_step", 1)) for f in figures), default=1)
    if step > 1:
        notes.append(f"A long text: the axes name every {ordinal(step)} token so that the labels stay readable; "
                     "hover a cell for its two tokens (the focus buttons above list them all).")
    for n in notes:  # under the panels, so that they start high on the screen
        st.caption(n)
    # layer/head changes drawn in the browser at once (the rerun then redraws the same from the server); not
    # when a chart that depends on the layer has no frames (lines, comparison, difference, focus bars)
    layer_bound = second is not None or view.draw != "heatmap" or bool(view.diff) or view.focus is not None
    frames = None if layer_bound else ui.instant_frames(a, view, keys, len(positions), lm, session, strips)
    ui.instant_switch(frames)

    # --- under the maps, sized like them: difference and player side by side, focus bars ------------------
    extra: list[tuple] = []  # (figure, tag, heading, explanation)
    by_key = {p.key: p for p in panels}
    if view.diff and all(k in by_key for k in view.diff):
        pa, pb = by_key[view.diff[0]], by_key[view.diff[1]]
        fig = viz.difference(pa.matrix, pb.matrix, pa.row_labels, name_a=ui.title(pa.key), name_b=ui.title(pb.key),
                             positions=pa.index, causal=lm.is_causal, boundary=boundary, font_size=fs,
                             present=view.present, width=width)
        extra.append((fig, "diff", "Difference A − B",
                      f"Each row of A ({ui.title(pa.key)}) and of B ({ui.title(pb.key)}) as shares of the row, then "
                      "A − B: red where A gives a token pair more than B, blue where less (0 = they agree)."))
    if view.player and view.player in a:
        stack, keep = data.layer_stack(a, view.player, view.head, view.hide_special, view.values)
        fig = viz.layer_player(stack, [labels[i] for i in keep], title=f"{ui.title(view.player)} through the layers",
                               positions=keep, causal=lm.is_causal, boundary=boundary, font_size=fs,
                               present=view.present, colorbar_title=data.unit(view.player, view.values),
                               start=view.layer, width=width)
        extra.append((fig, "player", "Layer player", "▶ plays the map from layer 0 to the last; drag the slider to "
                      "stop at a layer. One colour scale for all layers, so colours compare across frames."))
    if extra:  # one row of panels, each the width of a main panel, its explanation under it
        for col, (fig, tag, heading, explanation) in zip(st.columns(2, gap="medium"), extra):
            with col:
                ui.chart(fig, key=f"panel_{tag}", filename=f"{stem}_{tag}")
                st.caption(ui.plain(f"{heading}: {explanation}", None))
            figures.append(fig)
            captions.append(f"{heading}: {explanation}")
    if view.focus is not None:
        rows = data.focus_rows(panels, view.focus)
        fig = viz.bars(rows, labels, [p.index for p in panels if view.focus in p.index], width=ui.main_width(),
                       focus_label=f"{labels[view.focus]} [{view.focus}]", font_size=fs)
        ui.chart(fig, key="focus_bars", filename=f"{stem}_focus")

    # --- export ----------------------------------------------------------------------------------------------
    st.caption("Export: PNG or SVG (sidebar) from the camera icon in each chart's toolbar; the whole view as one "
               "HTML file that opens offline, hover included; the numbers shown above as CSV or NPZ."
               + (" " + data.CSV_MASKED_NOTE if lm.is_causal else ""))
    e1, e2, e3, _ = st.columns([1, 1, 1, 3])
    with e1:
        st.download_button("Download CSV", lambda: data.panels_csv(panels, lm.is_causal), file_name=stem + ".csv", mime="text/csv",
                           on_click="ignore")
    with e2:
        st.download_button("Download NPZ", lambda: data.panels_npz(panels, list(a.tokens)), file_name=stem + ".npz",
                           mime="application/octet-stream", on_click="ignore")
    with e3:
        st.download_button("Download HTML", ui.view_html(figures, captions, lm.name, view), file_name=stem + ".html",
                           mime="text/html", on_click="ignore")


def _label(k: str) -> str:
    return k if k == NONE else ui.title(k)


ui.run_page(page)
