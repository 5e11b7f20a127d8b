"""The Why page for the models its panels do not fit: an encoder–decoder (toy-mt: a target word explained from
the source and the target words before it) and a model on the raw-attention floor (no architecture row: its
candidates and logit lens only)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from ...attribution import actual_next
from ...core.errors import NormvizError
from ...viz import why as vw
from ..kit import st_parts as ui
from ..kit.memo import memoised
from . import continuation as CV
from . import frame
from . import why as W


def seq2seq(lm, view, wv, fs) -> None:
    """An encoder–decoder (toy-mt): the text is the source, the target is generated; a target word is explained
    from the source and the target words before it (sources over both), with its candidates and logit lens."""
    frame.text(view.text, "The text is empty. Type a source sentence; the page explains the words of its translation.")
    session = frame.session(lm, view.text, target="")
    tok, rows = lm.tokenizer, list(session.tgt_tokens)
    n = len(rows)  # decoder row r (after target word r) predicts the target's next word
    nxt = [int(actual_next(session, r)) for r in range(n)]
    if n < 1:
        st.info("The generated translation is empty: nothing to explain.")
        st.stop()
    CV.seq2seq_section(lm, session, view, wv, fs)  # the whole translation's heatmap (a row click picks the word)
    ui.seed_index("w_why_pos", 0 if wv.position is None else wv.position, n, "position")
    pos = st.selectbox(
        "Target word",
        list(range(n)),
        key="w_why_pos",
        format_func=lambda r: f"{r}: {vw.shown(W.token_text(tok, nxt[r]))} (after {vw.shown(rows[r])})",
    )
    wv.position = int(pos)
    W.save_why(view, wv)
    st.caption(ui.plain(f"Source: {' '.join(session.src_tokens)} → target: {' '.join(rows)}", None))
    try:
        cands = session.predict(top=W.TOP, position=pos)
        e = session.explain(position=pos, token=nxt[pos])
        lens = session.logit_lens(position=pos)
    except NormvizError as exc:
        frame.stop_with("error", str(exc))
    left, right = st.columns([2, 3], gap="medium")
    with left:
        ids = [c.id for c in cands]
        fig = vw.candidates(
            [c.token for c in cands],
            [c.prob for c in cands],
            font_size=fs,
            chosen=ids.index(e.token) if e.token in ids else None,
            title=f"After {vw.shown(rows[pos])}: the top {len(cands)}",
        )
        ui.context_line(fig, lm.name, view.text, fs)
        ui.chart(fig, key="candidates", filename="normviz_why_candidates")
    with right:
        names = [("src " if k < e.n_source else "tgt ") + t for k, t in enumerate(e.source_tokens)]
        fig = vw.signed_bars(
            e.sources,
            names,
            extra={"bias": e.bias},
            font_size=fs,
            what=f"part of logit({vw.shown(e.token_text)})",
            title=f"Which source and target tokens carry logit({vw.shown(e.token_text)})",
        )
        ui.context_line(fig, lm.name, view.text, fs)
        ui.chart(fig, key="sources", filename="normviz_why_sources")
        st.caption(
            ui.plain(
                f"Σ tokens + bias = {e.sources.sum() + e.bias:.4f}; the model's logit = {e.total:.4f}: "
                "they are equal (the split is complete).",
                None,
            )
        )
    curves = W.lens_curves(lens, {e.token_text: e.token})
    fig = vw.lens_lines(
        curves,
        model_probs={e.token_text: float(np.exp(lens[-1, e.token]))},
        font_size=fs,
        title="Logit lens of the decoder: the probability after every layer",
    )
    ui.chart(fig, key="lens", filename="normviz_why_lens")
    if not e.has_direct:
        ui.say("info", "Which heads: " + (e.direct_refusal or ""))
    st.caption(
        "Information-flow routes follow one self-attention stack: for encoder–decoders they are not drawn "
        "yet. The Translate page shows this model's cross-attention maps."
    )


def floor_view(session, c, tokens: list[str], tok, fs) -> None:
    """A model on the raw-attention floor: the model's candidates and its logit lens (explain needs a row)."""
    cands, ids, target, foil, pos = c.cands, c.ids, c.target, c.foil, c.pos
    lens = memoised(
        session,
        ("why_lens", int(pos), tuple(ids)),
        lambda: W.lens_view(session.logit_lens(position=pos), tok, sorted(set(ids) | {target})),
    )
    ui.chart(
        vw.candidates(
            [x.token for x in cands],
            [x.prob for x in cands],
            chosen=ids.index(target) if target in ids else None,
            foil=ids.index(foil) if foil in ids else None,
            font_size=fs,
            title=f"After {vw.shown(tokens[pos])} [{pos}]: the top {len(cands)}",
        ),
        key="candidates",
        filename="normviz_why_candidates",
    )
    curves = lens.curves({W.token_text(tok, target): target})
    ui.chart(
        vw.lens_lines(
            curves,
            model_probs={k: float(p[-1]) for k, p in curves.items()},
            font_size=fs,
            layer=len(lens.table) - 1,
            title="Logit lens: the probability after every layer",
        ),
        key="lens",
        filename="normviz_why_lens",
    )
