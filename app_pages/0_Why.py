"""normviz · Why: why the model predicts this token (rather than that one) — candidates, input tokens, heads,
logit lens, information-flow routes, attention sinks. All numbers from normviz (Session.predict / explain /
logit_lens, normviz.routes); figures from normviz.viz.why. The page composes its regions
(:mod:`normviz.ui.views.why_controls`, :mod:`normviz.ui.views.why_panels`, :mod:`normviz.ui.views.why_other`)."""

import streamlit as st

from normviz.core.errors import NormvizError
from normviz.ui.kit import st_parts as ui
from normviz.ui.kit.memo import memoised
from normviz.ui.views import continuation as CV
from normviz.ui.views import frame, why_other
from normviz.ui.views import why as W
from normviz.ui.views import why_controls as C
from normviz.ui.views import why_panels as P
from normviz.viz import why as vw

ui.page_config("Why", "❓")
POS, LENS_LAYER = C.POS, C.LENS_LAYER
# every box that holds a position, a token or a head/key of this text: dropped for a new text (ui.follow_text)
TEXT_KEYS = (POS, "w_why_token", "w_why_foil", "w_why_key", "w_why_layer", "w_why_head", LENS_LAYER)


def page() -> None:
    view, fs = ui.start_page(seq2seq=True)  # Why explains toy-mt too (its seq2seq part below)
    wv = W.why_view()
    wide = view.present
    bar = C.draw_text_row(view)
    W.follow_text(view.model, view.text, wv, TEXT_KEYS)  # a new text: its own last position, not the old index
    W.save_why(view, wv)
    lm = frame.model(view.model, device=False, named=True)
    why_not = W.has_head(lm) if not getattr(lm, "is_encoder_decoder", False) else None
    chosen = lm
    if why_not is not None:
        st.info(
            f"{ui.plain(lm.name, 80)} has no language-model head, so it predicts no tokens; this page shows "
            f"{W.FALLBACK_MODEL} instead (a 30-layer Llama-family decoder). Pick a model with a head in the "
            "sidebar to explain it."
        )
        lm = frame.model(W.FALLBACK_MODEL, device=False)
    if getattr(lm, "is_encoder_decoder", False):
        why_other.seq2seq(lm, view, wv, fs)
        return
    ui.show_device(lm)
    frame.text(view.text, "The text is empty. Type a sentence; the page explains the model's next token.")
    session = frame.session(lm, view.text)
    walk = CV.section(lm, session, view, wv, fs, chosen=chosen if chosen is not lm else None)  # a continuation
    if walk is not None:  # its step's panels: the text + continuation at the step's position
        session = walk[0]
    tok, n = lm.tokenizer, session.n_tokens
    tokens = list(session.labels)  # readable: " capital", not "Ġcapital"

    # ---- position, target, foil
    pos = C.draw_position(bar, session, wv, tokens)
    ui.seed(LENS_LAYER, lm.n_layers)  # the model's own row
    if wide:  # stage mode: ←/→ the position, ↑/↓ the lens's layer, Esc leaves (as on Explore)
        ui.keyboard(
            POS, walk[1] if walk else list(range(n)), LENS_LAYER, list(range(lm.n_layers + 1)), leave=ui.leave_stage
        )
    c = C.draw_target_foil(bar, lm, session, wv, pos, C.candidates(session, pos))
    W.save_why(view, wv)

    if lm.note:  # no architecture row (the raw-attention floor): candidates and logit lens only, its note above
        why_other.floor_view(session, c, tokens, tok, fs)
        st.stop()
    # once per session, position and token(s): a candidate visited again costs nothing
    e = memoised(
        session,
        ("why_explain", int(pos), c.target, c.foil),
        lambda: session.explain(token=c.target, foil=c.foil, position=pos),
    )
    try:
        lens = memoised(
            session,
            ("why_lens", int(pos), tuple(c.drawable)),
            lambda: W.lens_view(session.logit_lens(position=pos), tok, c.drawable),
        )
    except NormvizError as exc:
        frame.stop_with("error", str(exc))
    tname, fname = W.token_text(tok, c.target), (W.token_text(tok, c.foil) if c.foil is not None else None)
    what = f"logit({vw.shown(tname)})" + (f" − logit({vw.shown(fname)})" if fname is not None else "")
    refused = W.refusals(session, ui.settings().cost_budget_s, wv.tau)
    F = P.Figures(lm, view, fs, tokens)
    sources = P.draw_candidates_and_sources(F, e, c, what, refused)  # (1) candidates (2) input tokens (2b) depth
    P.draw_heads(F, e, session, c, what)  # (3) heads (3b) why one attends there (3c) the attribution graph
    lens_ids = {tname: c.target} | ({fname: c.foil} if c.foil is not None else {})
    P.draw_lens(F, lens, lens_ids)  # (4) logit lens (↑/↓ in stage mode: the layer read in the table)
    routes = P.draw_routes(F, session, wv, pos, refused)  # (5) routes
    P.draw_sinks(F, session, refused)  # (6) attention sinks
    P.draw_downloads(F, W.numbers(e, c.cands, lens_ids, lens, routes=routes, sources=sources))  # (8) downloads


ui.run_page(page)
