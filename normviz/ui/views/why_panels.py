"""The Why page's panels, a function per screen region: candidates and input tokens, the depth map, the heads
(and why one attends there, the attribution graph), the logit lens, the routes, the attention sinks and the
downloads. All numbers from normviz (Session.predict / explain / logit_lens, normviz.routes) through :mod:`.why`;
figures from normviz.viz; the controls: :mod:`.why_controls`."""

from __future__ import annotations

import json
from typing import cast

import numpy as np
import streamlit as st

from ...core.errors import NormvizError, TooCostlyError
from ...methods import sinks as sink_shares
from ...viz import attend as va
from ...viz import why as vw
from ...viz.depth import depth_heatmap
from ..kit import st_parts as ui
from ..kit.memo import memoised
from . import why as W
from .why_controls import LENS_LAYER


class Figures:
    """Draws the page's figures and keeps them (and their captions) for the HTML download."""

    def __init__(self, lm, view, fs: int, tokens: list[str]):
        self.lm, self.view, self.fs, self.tokens = lm, view, fs, tokens
        self.wide = view.present
        self.figures: list = []
        self.captions: list[str] = []

    def show(self, fig, key, caption="") -> None:
        if key != "sinks":
            ui.context_line(fig, self.lm.name, self.view.text, self.fs)  # an exported PNG says what it shows
        ui.chart(fig, key=key, filename=f"normviz_why_{key}")
        self.figures.append(fig)
        self.captions.append(caption)


def draw_candidates_and_sources(F: Figures, e, c, what: str, refused: dict):
    """(1) the model's candidates, (2) which input tokens carry the logit. Gives (sources, bias) or None."""
    fs, tokens, cands, ids, pos = F.fs, F.tokens, c.cands, c.ids, c.pos
    left, right = st.columns([2, 3], gap="medium")
    with left:
        chosen = ids.index(c.target) if c.target in ids else None
        F.show(
            vw.candidates(
                [x.token for x in cands],
                [x.prob for x in cands],
                chosen=chosen,
                foil=ids.index(c.foil) if c.foil in ids else None,
                font_size=fs,
                title=f"After {vw.shown(tokens[pos])} [{pos}]: the top {len(cands)}",
            ),
            "candidates",
            "The model's top next tokens and their probabilities.",
        )
        if not F.wide:
            st.caption(
                f"The model's own top {len(cands)} next tokens after position {pos}. Pick the token to "
                "explain (and a foil) above; an earlier position explains the text's own next token."
            )
    sources = None
    with right:
        if refused["sources"]:
            ui.say("warning", "Which input tokens: " + refused["sources"])
        else:
            try:
                sources = (e.sources, e.bias)
            except NormvizError as exc:
                ui.say("warning", "Which input tokens: " + str(exc))
        if sources is not None:
            s, b = sources
            F.show(
                vw.signed_bars(
                    s,
                    tokens,
                    extra={"bias": b},
                    font_size=fs,
                    what=f"part of {what}",
                    title=f"Which input tokens carry {what}",
                ),
                "sources",
                "Every input token's part, carried exactly through every layer (+ all biases).",
            )
            st.caption(
                ui.plain(
                    f"Σ tokens + bias = {s.sum() + b:.4f}; the model's {what} = {e.total:.4f}: "
                    "they are equal (the split is complete). Blue raises it, red lowers it.",
                    None,
                )
            )
    # (2b) where the information sits at each depth (normviz.viz.depth)
    if sources is not None:
        F.show(
            depth_heatmap(e.sources_by_layer, tokens, what=what, font_size=fs),
            "depth",
            "Each position's part as its residual state entering each layer carries it (exact: every row + the "
            "biases above it = the total).",
        )
    return sources


def draw_heads(F: Figures, e, session, c, what: str) -> None:
    """(3) which heads write the logit directly; a clicked (or chosen) head's source tokens, why it attends
    there, and the attribution graph."""
    lm, fs, tokens = F.lm, F.fs, F.tokens
    cols = st.columns([3, 2], gap="medium") if e.has_direct else [st.container()]
    if not e.has_direct:
        ui.say("info", "Which heads: " + (e.direct_refusal or ""))
        return
    grid, extra = W.grid_columns(e)
    with cols[0]:
        F.show(
            vw.head_grid(grid, extra, font_size=fs, title=f"Which heads write {what} directly"),
            "why_heads",
            "Direct part of each head (through all its source tokens), FF, b^O, embedding.",
        )
        total = grid.sum() + sum(np.nansum(v) for v in extra.values())
        st.caption(
            ui.plain(
                f"Σ cells = {total:.4f} = the model's {what} ({e.total:.4f}). Colours fit the "
                "heads (FF and embedding cells may saturate; hover reads every value). Click a "
                "head's cell to see which tokens it carried and why it attends there.",
                None,
            )
        )
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
        F.show(
            vw.signed_bars(
                e.heads[int(hl), int(hh)],
                tokens,
                font_size=fs,
                what="direct part",
                title=f"Layer {int(hl)} head {int(hh)}: which source tokens it carried",
            ),
            "head_row",
            "One head's direct part through each source token.",
        )
        ui.link_to_page(
            "app_pages/0_Explore.py",
            f"Open layer {int(hl)}, head {int(hh)} on Explore",
            {"layer": int(hl), "head": int(hh)},
        )
    if not getattr(lm, "is_encoder_decoder", False) and lm.spec.placement == "pre":
        draw_attend(F, e, session, int(hl), int(hh), c.pos)
    if not getattr(lm, "is_encoder_decoder", False) and lm.spec.placement == "pre" and len(tokens) <= 128:
        draw_graph(F, session, c, what)


def draw_attend(F: Figures, e, session, hl: int, hh: int, pos: int) -> None:
    """(3b) why that head attends there (normviz.attribution.qk, exact; pre-LN decoders)."""
    fs, tokens = F.fs, F.tokens
    row = e.heads[hl, hh, : pos + 1]
    carried = int(np.argmax(np.abs(row)))
    k1, k2 = st.columns([1, 3])
    with k1:
        key = int(
            cast(
                int,
                st.selectbox(
                    "Key token it attends to",
                    list(range(pos + 1)),
                    index=carried,
                    format_func=lambda j: f"{vw.shown(tokens[j])} [{j}]",
                    key="w_why_key",
                    help="Default: the source token this head carried most.",
                ),
            )
        )
    try:
        att = W.attend_at(session, hl, hh, pos, key, by_token=len(tokens) <= 64)
    except NormvizError as exc:
        ui.say("info", "Why it attends there: " + str(exc))
        return
    labels, m = att.grouped(by="layer")
    F.show(
        va.score_split(
            labels,
            m,
            font_size=fs,
            title=f"Why layer {hl} head {hh} attends from {vw.shown(tokens[pos])} to {vw.shown(tokens[key])}",
        ),
        "attend_split",
        "Its pre-softmax score split exactly: rows = the layer that wrote into the "
        "query's state, columns = into the key's (RoPE and the norm's scale included).",
    )
    pairs = att.top_pairs(10, by="token" if att.by_token_full is not None else "component")
    F.show(
        va.top_pairs_bars(pairs, font_size=fs, title="The pairs that build the score"),
        "attend_pairs",
        "The largest parts: query side · key side.",
    )
    with k2:
        st.caption(
            ui.plain(
                f"Score {att.total:.4f} = Σ parts (the model's own {att.model_score:.4f}); "
                "softmax over the keys gives the head's attention weights.",
                None,
            )
        )


def draw_graph(F: Figures, session, c, what: str) -> None:
    """(3c) the attribution graph (normviz.graph: heads and FF blocks as nodes, exact edges) and its JSON."""
    try:
        g = W.graph_at(session, c.target, c.foil, c.pos)
    except NormvizError as exc:
        ui.say("info", "Attribution graph: " + str(exc))
        return
    F.show(
        va.attribution_graph(g, font_size=F.fs, title=f"Attribution graph of {what}"),
        "graph",
        "Nodes: tokens, heads, FF blocks, the logit; an edge is a direct effect through the node it "
        "enters (circuit-tracer's pruning: 80 % of node influence, 98 % of edge influence).",
    )
    st.download_button(
        "Download the graph (Neuronpedia JSON)",
        json.dumps(g.to_neuronpedia("normviz-why")),
        file_name="normviz-graph.json",
        mime="application/json",
        key="w_why_graph_dl",
    )


def draw_lens(F: Figures, lens, lens_ids: dict) -> None:
    """(4) the logit lens: the probabilities through the layers, and a layer's top tokens (↑/↓ in stage mode)."""
    fs = F.fs
    curves = lens.curves(lens_ids)
    model_p = {k: float(p[-1]) for k, p in curves.items()}
    l1, l2 = st.columns([3, 2], gap="medium")
    with l2:
        lens_layer = st.slider(
            "Lens: after layer (0 = embedding)",
            0,
            len(lens.table) - 1,
            key=LENS_LAYER,
            help="The layer whose top tokens head the table (↑/↓ in stage mode).",
        )
        F.show(
            vw.lens_table(
                lens.table,
                layer=int(lens_layer),
                font_size=fs,
                title=f"Lens top {3 if fs >= 16 else 5}: layer {int(lens_layer)} first",
            ),
            "lens_table",
            "Top 5 tokens of the logit lens per layer (0 = the embedding; the last row is the model).",
        )
    with l1:
        F.show(
            vw.lens_lines(
                curves,
                model_probs=model_p,
                font_size=fs,
                layer=int(lens_layer),
                title="Logit lens: the probability after every layer",
            ),
            "lens",
            "Each layer's residual state read through the final norm and LM head.",
        )


def draw_routes(F: Figures, session, wv, pos: int, refused: dict):
    """(5) the information-flow routes at the threshold τ (its slider beside them). Gives the routes or None."""
    routes = None
    ui.seed("w_why_tau", float(wv.tau))
    r1, r2 = st.columns([4, 1]) if not F.wide else (st.container(), st.container())
    with r2:
        tau = st.slider(
            "Threshold τ",
            0.01,
            0.5,
            step=0.01,
            key="w_why_tau",
            help="Edges whose importance (normalised L1 proximity) is above τ are kept.",
        )
    wv.tau = round(float(tau), 3)
    W.save_why(F.view, wv)
    with r1:
        if refused["routes"]:
            ui.say("warning", "Routes: " + refused["routes"])
        else:
            try:  # refused at the slider's new τ, or stopped at the routes' deadline: a message
                routes = W.routes_at(session, pos, wv.tau)
            except NormvizError as exc:
                ui.say("warning", "Routes: " + str(exc))
        if routes is not None:
            F.show(
                vw.routes_graph(
                    routes.to_dict(),
                    font_size=F.fs,
                    title=f"Information-flow routes to the prediction (τ = {wv.tau:g})",
                ),
                "routes",
                "Ferrando & Voita 2024: edges whose importance exceeds τ, traced back from the prediction.",
            )
            if not F.wide:
                st.caption(
                    f"{len(routes.edges)} edges, {len(routes.nodes)} nodes. Columns: layers (each with its "
                    "attention step); rows: tokens. Blue: attention heads, grey: residual, orange: FF. "
                    "Hover an edge's dot for its head and tokens."
                )
    return routes


def draw_sinks(F: Figures, session, refused: dict) -> None:
    """(6) attention sinks: one layer's α at a time from the records (normviz.methods.sinks), never [L, H, n, n]."""
    try:
        if refused["sinks"]:
            raise TooCostlyError(refused["sinks"])
        wa, wn = memoised(session, "why_sinks", lambda: sink_shares.first_token_shares(session))
    except NormvizError as exc:
        ui.say("warning", "Attention sinks (the last panel) are not drawn: " + str(exc))
        return
    s1, s2 = st.columns([3, 2], gap="medium")
    with s1:
        F.show(
            vw.sinks_scatter(wa, wn, first_token=F.tokens[0], font_size=F.fs),
            "sinks",
            "Per head: α's share on the first token vs ‖α f(x)‖'s share.",
        )
    with s2:
        if not F.wide:
            st.caption(
                "Decoders park attention on the first token (an attention sink); dots far below the "
                "diagonal put weight there but move little: the vectors say more than the weights "
                "(Kobayashi et al. 2020's [CLS]/[SEP] finding)."
            )


def draw_downloads(F: Figures, nums: dict) -> None:
    """(8) the numbers (NPZ, JSON) and the figures (one offline HTML file)."""
    stem = f"normviz_why_{F.lm.name.replace('/', '_')}"
    d1, d2, d3 = st.columns(3)
    with d1:
        st.download_button(
            "Numbers (NPZ)", lambda: W.to_npz(nums), file_name=stem + ".npz", mime="application/octet-stream"
        )
    with d2:
        st.download_button("Numbers (JSON)", lambda: W.to_json(nums), file_name=stem + ".json", mime="application/json")
    with d3:
        st.download_button(
            "Figures (HTML)",
            ui.view_html(F.figures, F.captions, F.lm.name, F.view),
            file_name=stem + ".html",
            mime="text/html",
        )
    if not F.wide:
        st.caption("Direct logit attribution, the exact propagation and the routes are explained on the Learn page.")
