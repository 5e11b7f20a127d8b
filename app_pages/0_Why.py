"""normviz · Why: why the model predicts this token (rather than that one) — candidates, input tokens, heads,
logit lens, information-flow routes, attention sinks. All numbers from normviz (Session.predict / explain /
logit_lens, normviz.routes); figures from normviz.viz.why; this file only draws."""
import json

import numpy as np
import streamlit as st

import normviz
import normviz.methods.sinks
from normviz.ui.kit import st_parts as ui
from normviz.ui.kit.memo import memoised
from normviz.ui.views import continuation as CV
from normviz.ui.views import why as W
from normviz.viz import attend as va
from normviz.viz import why as vw
from normviz.viz.depth import depth_heatmap

ui.page_config("Why", "❓")
NONE = "(none)"
POS, LENS_LAYER = "w_why_pos", "w_why_lens_layer"
# every box that holds a position, a token or a head/key of this text: dropped for a new text (ui.follow_text)
TEXT_KEYS = (POS, "w_why_token", "w_why_foil", "w_why_key", "w_why_layer", "w_why_head", LENS_LAYER)


def page() -> None:
    view, fs = ui.start_page(seq2seq=True)  # Why explains toy-mt too (its seq2seq part below)
    wv = W.why_view()
    wide = view.present

    if not wide:
        st.subheader("Why this token? Exact parts of a prediction")
    bar = st.columns([4, 2, 3, 3], vertical_alignment="bottom") if wide else None
    with bar[0] if bar else st.container():
        view.text = ui.text_box("Text (the model predicts what comes next)", "w_text", view.text,
                                max_chars=ui.settings().max_text_chars)
    W.follow_text(view.model, view.text, wv, TEXT_KEYS)  # a new text: its own last position, not the old index
    W.save_why(view, wv)
    lm = ui.load_model(view.model) if view.model else None
    if lm is None:
        st.stop()
    why_not = W.has_head(lm) if not getattr(lm, "is_encoder_decoder", False) else None
    chosen = lm
    if why_not is not None:
        st.info(f"{ui.plain(lm.name, 80)} has no language-model head, so it predicts no tokens; this page shows "
                f"{W.FALLBACK_MODEL} instead (a 30-layer Llama-family decoder). Pick a model with a head in the "
                "sidebar to explain it.")
        lm = ui.load_model(W.FALLBACK_MODEL)
        if lm is None:
            st.stop()
    if getattr(lm, "is_encoder_decoder", False):
        seq2seq(lm, view, wv, fs)
        return
    ui.show_device(lm)
    if not view.text.strip():
        st.error("The text is empty. Type a sentence; the page explains the model's next token.")
        st.stop()
    session = ui.session_for(lm, view.text)
    if session is None:
        st.stop()
    walk = CV.section(lm, session, view, wv, fs, chosen=chosen if chosen is not lm else None)  # a continuation
    if walk is not None:  # its step's panels: the text + continuation at the step's position
        session = walk[0]
    tok, n = lm.tokenizer, session.n_tokens
    tokens = list(session.labels)  # readable: " capital", not "Ġcapital"
    vocab = W.readout_of(lm).vocab_size

    # ---- position, target, foil
    with bar[1] if bar else st.container():
        ui.seed_index("w_why_pos", n - 1 if wv.position is None else wv.position, n, "position")
        pos = st.selectbox("Position", list(range(n)), key="w_why_pos",
                           format_func=lambda k: f"{k}: {vw.shown(tokens[k])}" + (" (last)" if k == n - 1 else ""),
                           help="The prediction after this token. An earlier position explains the text's own "
                                "next token there.")
    wv.position = None if pos == n - 1 else int(pos)
    ui.seed(LENS_LAYER, lm.n_layers)  # the model's own row
    if wide:  # stage mode: ←/→ the position, ↑/↓ the lens's layer, Esc leaves (as on Explore)
        ui.keyboard(POS, walk[1] if walk else list(range(n)), LENS_LAYER, list(range(lm.n_layers + 1)), leave=ui.leave_stage)
    try:
        # once per session and position (a new candidate, foil or τ reuses them; ui.memo)
        cands = memoised(session, ("why_predict", int(pos)), lambda: session.predict(top=W.TOP, position=pos))
    except normviz.core.errors.NormvizError as exc:
        ui.say("error", str(exc))
        st.stop()
    ids = [c.id for c in cands]
    default = cands[0].id if pos == n - 1 else int(session.encoded.ids[pos + 1])
    want, note = W.resolve(tok, vocab, wv.token, "token")
    if note and "w_why_token" not in st.session_state:
        ui.say("warning", note)
    options = list(dict.fromkeys(ids + [default] + ([want] if want is not None else [])))
    label = {c.id: f"{vw.shown(c.token)} ({c.prob:.1%})" for c in cands}

    def name(t):
        return label.get(t) or f"{vw.shown(W.token_text(tok, t))}" + (" (the text's next token)" if t == default else "")
    ui.seed("w_why_token", want if want is not None else default)
    if st.session_state["w_why_token"] not in options:
        st.session_state["w_why_token"] = default
    with bar[2] if bar else st.container():
        c1, c2 = (st.container(), None) if bar else st.columns(2)
        with c1:
            target = st.selectbox("Explain the token", options, key="w_why_token", format_func=name)
    foil_want, note = W.resolve(tok, vocab, wv.foil, "foil")
    if note and "w_why_foil" not in st.session_state:
        ui.say("warning", note)
    foil_opts = [NONE] + list(dict.fromkeys(ids + ([foil_want] if foil_want is not None else [])))
    ui.seed("w_why_foil", foil_want if foil_want is not None else NONE)
    if st.session_state["w_why_foil"] not in foil_opts:
        st.session_state["w_why_foil"] = NONE
    with bar[3] if bar else (c2 or st.container()):
        foil = st.selectbox("… rather than (foil)", foil_opts, key="w_why_foil",
                            format_func=lambda t: t if t == NONE else name(t))
    if foil != NONE and foil == target:  # logit(t) − logit(t) = 0: nothing to explain; said, not dropped silently
        ui.say("info", f"The foil {vw.shown(W.token_text(tok, int(foil)))} is the token being explained (their "
                       "difference is 0), so the page explains the token alone. Pick another foil to compare it with.")
    foil = None if foil == NONE or foil == target else int(foil)
    wv.token = "" if target == default else W.token_param(tok, vocab, int(target))
    wv.foil = "" if foil is None else W.token_param(tok, vocab, foil)
    W.save_why(view, wv)

    if lm.note:  # no architecture row (the raw-attention floor): candidates and logit lens only, its note above
        _floor_view(session, cands, ids, int(target), foil, pos, tokens, tok, fs)
        st.stop()
    # once per session, position and token(s): a candidate visited again costs nothing
    e = memoised(session, ("why_explain", int(pos), int(target), foil),
                 lambda: session.explain(token=int(target), foil=foil, position=pos))
    # the lens as shown (top-5 table + the columns of every token the boxes offer), not its [L+1, V] array
    drawable = sorted({int(t) for t in options} | {int(t) for t in foil_opts if t != NONE})
    try:
        lens = memoised(session, ("why_lens", int(pos), tuple(drawable)),
                        lambda: W.lens_view(session.logit_lens(position=pos), tok, drawable))
    except normviz.core.errors.NormvizError as exc:
        ui.say("error", str(exc))
        st.stop()
    tname, fname = W.token_text(tok, int(target)), (W.token_text(tok, foil) if foil is not None else None)
    what = f"logit({vw.shown(tname)})" + (f" − logit({vw.shown(fname)})" if fname is not None else "")
    refused = W.refusals(session, ui.settings().cost_budget_s, wv.tau)
    figures, captions = [], []

    def show(fig, key, caption=""):
        if key != "sinks":
            ui.context_line(fig, lm.name, view.text, fs)  # an exported PNG says what it shows
        ui.chart(fig, key=key, filename=f"normviz_why_{key}")
        figures.append(fig)
        captions.append(caption)

    # ---- (1) candidates  (2) input tokens
    left, right = st.columns([2, 3], gap="medium")
    with left:
        chosen = ids.index(int(target)) if int(target) in ids else None
        show(vw.candidates([c.token for c in cands], [c.prob for c in cands], chosen=chosen,
                           foil=ids.index(foil) if foil in ids else None, font_size=fs,
                           title=f"After {vw.shown(tokens[pos])} [{pos}]: the top {len(cands)}"),
             "candidates", "The model's top next tokens and their probabilities.")
        if not wide:
            st.caption(f"The model's own top {len(cands)} next tokens after position {pos}. Pick the token to "
                       "explain (and a foil) above; an earlier position explains the text's own next token.")
    sources = None
    with right:
        if refused["sources"]:
            ui.say("warning", "Which input tokens: " + refused["sources"])
        else:
            try:
                sources = (e.sources, e.bias)
            except normviz.core.errors.NormvizError as exc:
                ui.say("warning", "Which input tokens: " + str(exc))
        if sources is not None:
            s, b = sources
            show(vw.signed_bars(s, tokens, extra={"bias": b}, font_size=fs, what=f"part of {what}",
                                title=f"Which input tokens carry {what}"),
                 "sources", "Every input token's part, carried exactly through every layer (+ all biases).")
            st.caption(ui.plain(f"Σ tokens + bias = {s.sum() + b:.4f}; the model's {what} = {e.total:.4f}: "
                                "they are equal (the split is complete). Blue raises it, red lowers it.", None))

    # ---- (2b) where the information sits at each depth (normviz.viz.depth)
    if sources is not None:
        show(depth_heatmap(e.sources_by_layer, tokens, what=what, font_size=fs), "depth",
             "Each position's part as its residual state entering each layer carries it (exact: every row + the "
             "biases above it = the total).")

    # ---- (3) heads
    cols = st.columns([3, 2], gap="medium") if e.has_direct else [st.container()]
    if not e.has_direct:
        ui.say("info", "Which heads: " + (e.direct_refusal or ""))
    else:
        grid, extra = W.grid_columns(e)
        with cols[0]:
            show(vw.head_grid(grid, extra, font_size=fs, title=f"Which heads write {what} directly"),
                 "why_heads", "Direct part of each head (through all its source tokens), FF, b^O, embedding.")
            total = grid.sum() + sum(np.nansum(v) for v in extra.values())
            st.caption(ui.plain(f"Σ cells = {total:.4f} = the model's {what} ({e.total:.4f}). Colours fit the "
                                "heads (FF and embedding cells may saturate; hover reads every value). Click a "
                                "head's cell to see which tokens it carried and why it attends there.", None))
        clicked = ui.grid_clicks({"why_heads": lm.n_heads}, 1)
        if clicked is not None and clicked["head"] is not None and clicked["head"] < lm.n_heads:
            # a head's cell: that head in the boxes beside the grid, and why it attends there below them
            # (Explore is one link away, under its row)
            st.session_state["w_why_layer"] = int(clicked["layer"])
            st.session_state["w_why_head"] = int(clicked["head"])
            st.session_state.pop("w_why_key", None)  # the new head's own most-carried token
        with cols[1]:
            L, H = e.heads.shape[:2]
            best = np.unravel_index(np.argmax(np.abs(grid)), grid.shape)
            ui.seed("w_why_layer", int(best[0]))
            ui.seed("w_why_head", int(best[1]))
            a, b_ = st.columns(2)
            with a:
                hl = st.number_input("Layer", 0, L - 1, key="w_why_layer")
            with b_:
                hh = st.number_input("Head", 0, H - 1, key="w_why_head")
            show(vw.signed_bars(e.heads[int(hl), int(hh)], tokens, font_size=fs, what="direct part",
                                title=f"Layer {int(hl)} head {int(hh)}: which source tokens it carried"),
                 "head_row", "One head's direct part through each source token.")
            ui.link_to_page("app_pages/0_Explore.py", f"Open layer {int(hl)}, head {int(hh)} on Explore",
                            {"layer": int(hl), "head": int(hh)})

        # ---- (3b) why that head attends there (normviz.attribution.qk, exact; pre-LN decoders)
        if not getattr(lm, "is_encoder_decoder", False) and lm.spec.placement == "pre":
            row = e.heads[int(hl), int(hh), : pos + 1]
            carried = int(np.argmax(np.abs(row)))
            k1, k2 = st.columns([1, 3])
            with k1:
                key = st.selectbox("Key token it attends to", list(range(pos + 1)), index=carried,
                                   format_func=lambda j: f"{vw.shown(tokens[j])} [{j}]", key="w_why_key",
                                   help="Default: the source token this head carried most.")
            try:
                att = W.attend_at(session, int(hl), int(hh), pos, int(key), by_token=len(tokens) <= 64)
            except normviz.core.errors.NormvizError as exc:
                ui.say("info", "Why it attends there: " + str(exc))
            else:
                labels, m = att.grouped(by="layer")
                show(va.score_split(labels, m, font_size=fs,
                                    title=f"Why layer {int(hl)} head {int(hh)} attends from "
                                          f"{vw.shown(tokens[pos])} to {vw.shown(tokens[int(key)])}"),
                     "attend_split", "Its pre-softmax score split exactly: rows = the layer that wrote into the "
                                     "query's state, columns = into the key's (RoPE and the norm's scale included).")
                pairs = att.top_pairs(10, by="token" if att.by_token_full is not None else "component")
                show(va.top_pairs_bars(pairs, font_size=fs, title="The pairs that build the score"),
                     "attend_pairs", "The largest parts: query side · key side.")
                with k2:
                    st.caption(ui.plain(f"Score {att.total:.4f} = Σ parts (the model's own {att.model_score:.4f}); "
                                        "softmax over the keys gives the head's attention weights.", None))

        # ---- (3c) the attribution graph (normviz.graph: heads and FF blocks as nodes, exact edges)
        if not getattr(lm, "is_encoder_decoder", False) and lm.spec.placement == "pre" and len(tokens) <= 128:
            try:
                g = W.graph_at(session, int(target), foil, pos)
            except normviz.core.errors.NormvizError as exc:
                ui.say("info", "Attribution graph: " + str(exc))
            else:
                show(va.attribution_graph(g, font_size=fs, title=f"Attribution graph of {what}"), "graph",
                     "Nodes: tokens, heads, FF blocks, the logit; an edge is a direct effect through the node it "
                     "enters (circuit-tracer's pruning: 80 % of node influence, 98 % of edge influence).")
                st.download_button("Download the graph (Neuronpedia JSON)",
                                   json.dumps(g.to_neuronpedia("normviz-why")), file_name="normviz-graph.json",
                                   mime="application/json", key="w_why_graph_dl")

    # ---- (4) logit lens (↑/↓ in stage mode: the layer read in the table)
    lens_ids = {tname: int(target)} | ({fname: foil} if foil is not None else {})
    curves = lens.curves(lens_ids)
    model_p = {k: float(p[-1]) for k, p in curves.items()}
    l1, l2 = st.columns([3, 2], gap="medium")
    with l2:
        lens_layer = st.slider("Lens: after layer (0 = embedding)", 0, len(lens.table) - 1, key=LENS_LAYER,
                               help="The layer whose top tokens head the table (↑/↓ in stage mode).")
        show(vw.lens_table(lens.table, layer=int(lens_layer), font_size=fs,
                           title=f"Lens top {3 if fs >= 16 else 5}: layer {int(lens_layer)} first"),
             "lens_table", "Top 5 tokens of the logit lens per layer (0 = the embedding; the last row is the model).")
    with l1:
        show(vw.lens_lines(curves, model_probs=model_p, font_size=fs, layer=int(lens_layer),
                           title="Logit lens: the probability after every layer"),
             "lens", "Each layer's residual state read through the final norm and LM head.")

    # ---- (5) routes
    routes = None
    ui.seed("w_why_tau", float(wv.tau))
    r1, r2 = st.columns([4, 1]) if not wide else (st.container(), st.container())
    with r2:
        tau = st.slider("Threshold τ", 0.01, 0.5, step=0.01, key="w_why_tau",
                        help="Edges whose importance (normalised L1 proximity) is above τ are kept.")
    wv.tau = round(float(tau), 3)
    W.save_why(view, wv)
    with r1:
        if refused["routes"]:
            ui.say("warning", "Routes: " + refused["routes"])
        else:
            try:  # refused at the slider's new τ, or stopped at the routes' deadline: a message
                routes = W.routes_at(session, pos, wv.tau)
            except normviz.core.errors.NormvizError as exc:
                ui.say("warning", "Routes: " + str(exc))
        if routes is not None:
            show(vw.routes_graph(routes.to_dict(), font_size=fs,
                                 title=f"Information-flow routes to the prediction (τ = {wv.tau:g})"),
                 "routes", "Ferrando & Voita 2024: edges whose importance exceeds τ, traced back from the "
                           "prediction.")
            if not wide:
                st.caption(f"{len(routes.edges)} edges, {len(routes.nodes)} nodes. Columns: layers (each with its "
                           "attention step); rows: tokens. Blue: attention heads, grey: residual, orange: FF. "
                           "Hover an edge's dot for its head and tokens.")

    # ---- (6) attention sinks: one layer's α at a time from the records (normviz.methods.sinks), never [L, H, n, n]
    try:
        if refused["sinks"]:
            raise normviz.core.errors.TooCostlyError(refused["sinks"])
        wa, wn = memoised(session, "why_sinks", lambda: normviz.methods.sinks.first_token_shares(session))
    except normviz.core.errors.NormvizError as exc:
        ui.say("warning", "Attention sinks (the last panel) are not drawn: " + str(exc))
    else:
        s1, s2 = st.columns([3, 2], gap="medium")
        with s1:
            show(vw.sinks_scatter(wa, wn, first_token=tokens[0], font_size=fs), "sinks",
                 "Per head: α's share on the first token vs ‖α f(x)‖'s share.")
        with s2:
            if not wide:
                st.caption("Decoders park attention on the first token (an attention sink); dots far below the "
                           "diagonal put weight there but move little: the vectors say more than the weights "
                           "(Kobayashi et al. 2020's [CLS]/[SEP] finding).")

    # ---- (8) downloads
    nums = W.numbers(e, cands, lens_ids, lens, routes=routes, sources=sources)
    stem = f"normviz_why_{lm.name.replace('/', '_')}"
    d1, d2, d3 = st.columns(3)
    with d1:
        st.download_button("Numbers (NPZ)", lambda: W.to_npz(nums), file_name=stem + ".npz",
                           mime="application/octet-stream")
    with d2:
        st.download_button("Numbers (JSON)", lambda: W.to_json(nums), file_name=stem + ".json",
                           mime="application/json")
    with d3:
        st.download_button("Figures (HTML)", ui.view_html(figures, captions, lm.name, view), file_name=stem + ".html",
                           mime="text/html")
    if not wide:
        st.caption("Direct logit attribution, the exact propagation and the routes are explained on the Learn "
                   "page.")


def seq2seq(lm, view, wv, fs) -> None:
    """An encoder–decoder (toy-mt): the text is the source, the target is generated; a target word is explained
    from the source and the target words before it (sources over both), with its candidates and logit lens."""
    if not view.text.strip():
        st.error("The text is empty. Type a source sentence; the page explains the words of its translation.")
        st.stop()
    session = ui.session_for(lm, view.text, target="")
    if session is None:
        st.stop()
    tok, rows = lm.tokenizer, list(session.tgt_tokens)
    n = len(rows)  # decoder row r (after target word r) predicts the target's next word
    nxt = [int(normviz.attribution.actual_next(session, r)) for r in range(n)]
    if n < 1:
        st.info("The generated translation is empty: nothing to explain.")
        st.stop()
    CV.seq2seq_section(lm, session, view, wv, fs)  # the whole translation's heatmap (a row click picks the word)
    ui.seed_index("w_why_pos", 0 if wv.position is None else wv.position, n, "position")
    pos = st.selectbox("Target word", list(range(n)), key="w_why_pos",
                       format_func=lambda r: f"{r}: {vw.shown(W.token_text(tok, nxt[r]))} (after {vw.shown(rows[r])})")
    wv.position = int(pos)
    W.save_why(view, wv)
    st.caption(ui.plain(f"Source: {' '.join(session.src_tokens)} → target: {' '.join(rows)}", None))
    try:
        cands = session.predict(top=W.TOP, position=pos)
        e = session.explain(position=pos, token=nxt[pos])
        lens = session.logit_lens(position=pos)
    except normviz.core.errors.NormvizError as exc:
        ui.say("error", str(exc))
        st.stop()
    left, right = st.columns([2, 3], gap="medium")
    with left:
        ids = [c.id for c in cands]
        fig = vw.candidates([c.token for c in cands], [c.prob for c in cands], font_size=fs,
                            chosen=ids.index(e.token) if e.token in ids else None,
                            title=f"After {vw.shown(rows[pos])}: the top {len(cands)}")
        ui.context_line(fig, lm.name, view.text, fs)
        ui.chart(fig, key="candidates", filename="normviz_why_candidates")
    with right:
        names = [("src " if k < e.n_source else "tgt ") + t for k, t in enumerate(e.source_tokens)]
        fig = vw.signed_bars(e.sources, names, extra={"bias": e.bias}, font_size=fs,
                             what=f"part of logit({vw.shown(e.token_text)})",
                             title=f"Which source and target tokens carry logit({vw.shown(e.token_text)})")
        ui.context_line(fig, lm.name, view.text, fs)
        ui.chart(fig, key="sources", filename="normviz_why_sources")
        st.caption(ui.plain(f"Σ tokens + bias = {e.sources.sum() + e.bias:.4f}; the model's logit = {e.total:.4f}: "
                            "they are equal (the split is complete).", None))
    curves = W.lens_curves(lens, {e.token_text: e.token})
    fig = vw.lens_lines(curves, model_probs={e.token_text: float(np.exp(lens[-1, e.token]))}, font_size=fs,
                        title="Logit lens of the decoder: the probability after every layer")
    ui.chart(fig, key="lens", filename="normviz_why_lens")
    if not e.has_direct:
        ui.say("info", "Which heads: " + (e.direct_refusal or ""))
    st.caption("Information-flow routes follow one self-attention stack: for encoder–decoders they are not drawn "
               "yet. The Translate page shows this model's cross-attention maps.")


def _floor_view(session, cands, ids, target, foil, pos, tokens, tok, fs) -> None:
    """A model on the raw-attention floor: the model's candidates and its logit lens (explain needs a row)."""
    lens = memoised(session, ("why_lens", int(pos), tuple(ids)),
                    lambda: W.lens_view(session.logit_lens(position=pos), tok, sorted(set(ids) | {target})))
    ui.chart(vw.candidates([c.token for c in cands], [c.prob for c in cands],
                           chosen=ids.index(target) if target in ids else None,
                           foil=ids.index(foil) if foil in ids else None, font_size=fs,
                           title=f"After {vw.shown(tokens[pos])} [{pos}]: the top {len(cands)}"),
             key="candidates", filename="normviz_why_candidates")
    curves = lens.curves({W.token_text(tok, target): target})
    ui.chart(vw.lens_lines(curves, model_probs={k: float(p[-1]) for k, p in curves.items()}, font_size=fs,
                           layer=len(lens.table) - 1, title="Logit lens: the probability after every layer"),
             key="lens", filename="normviz_why_lens")


ui.run_page(page)
