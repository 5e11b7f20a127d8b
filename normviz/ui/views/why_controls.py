"""The Why page's controls, a function per screen region: the text row, the position, the token to explain and
its foil (the numbers: :mod:`.why`; the panels: :mod:`.why_panels`)."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from ...core.errors import NormvizError
from ...viz import why as vw
from ..kit import st_parts as ui
from ..kit.memo import memoised
from . import frame
from . import why as W

NONE = "(none)"
POS, LENS_LAYER = "w_why_pos", "w_why_lens_layer"


@dataclass
class Choice:
    """What the controls chose: the position, the model's candidates there, the target and foil token ids, and
    every token the boxes offer (the lens draws their columns)."""

    pos: int
    cands: list
    ids: list[int]
    default: int
    target: int
    foil: int | None
    drawable: list[int]


def draw_text_row(view):
    """The heading and the text; stage mode: one compact bar (text, position, token, foil). Gives the bar."""
    wide = view.present
    if not wide:
        st.subheader("Why this token? Exact parts of a prediction")
    bar = st.columns([4, 2, 3, 3], vertical_alignment="bottom") if wide else None
    with bar[0] if bar else st.container():
        view.text = ui.text_box(
            "Text (the model predicts what comes next)", "w_text", view.text, max_chars=ui.settings().max_text_chars
        )
    return bar


def draw_position(bar, session, wv, tokens: list[str]) -> int:
    """The position whose prediction is explained (default: the last)."""
    n = session.n_tokens
    with bar[1] if bar else st.container():
        ui.seed_index(POS, n - 1 if wv.position is None else wv.position, n, "position")
        pos = st.selectbox(
            "Position",
            list(range(n)),
            key=POS,
            format_func=lambda k: f"{k}: {vw.shown(tokens[k])}" + (" (last)" if k == n - 1 else ""),
            help="The prediction after this token. An earlier position explains the text's own next token there.",
        )
    wv.position = None if pos == n - 1 else int(pos)
    return pos


def candidates(session, pos: int) -> list:
    """The model's top tokens at ``pos``, once per session and position (a new candidate, foil or τ reuses them;
    ui.memo); the run stops under the message when they cannot be computed."""
    try:
        return memoised(session, ("why_predict", int(pos)), lambda: session.predict(top=W.TOP, position=pos))
    except NormvizError as exc:
        frame.stop_with("error", str(exc))


def draw_target_foil(bar, lm, session, wv, pos: int, cands: list) -> Choice:
    """The token to explain (default: the top candidate, or at an earlier position the text's next token) and
    the foil it is explained against (none by default); a link's token that is not one is said."""
    tok, n = lm.tokenizer, session.n_tokens
    vocab = W.readout_of(lm).vocab_size
    ids = [c.id for c in cands]
    default = cands[0].id if pos == n - 1 else int(session.encoded.ids[pos + 1])
    want, note = W.resolve(tok, vocab, wv.token, "token")
    if note and "w_why_token" not in st.session_state:
        ui.say("warning", note)
    options = list(dict.fromkeys(ids + [default] + ([want] if want is not None else [])))
    label = {c.id: f"{vw.shown(c.token)} ({c.prob:.1%})" for c in cands}

    def name(t):
        return label.get(t) or f"{vw.shown(W.token_text(tok, t))}" + (
            " (the text's next token)" if t == default else ""
        )

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
        foil = st.selectbox(
            "… rather than (foil)", foil_opts, key="w_why_foil", format_func=lambda t: t if t == NONE else name(t)
        )
    if foil != NONE and foil == target:  # logit(t) − logit(t) = 0: nothing to explain; said, not dropped silently
        ui.say(
            "info",
            f"The foil {vw.shown(W.token_text(tok, int(foil)))} is the token being explained (their "
            "difference is 0), so the page explains the token alone. Pick another foil to compare it with.",
        )
    foil = None if foil == NONE or foil == target else int(foil)
    wv.token = "" if target == default else W.token_param(tok, vocab, int(target))
    wv.foil = "" if foil is None else W.token_param(tok, vocab, foil)
    # the lens as shown (top-5 table + the columns of every token the boxes offer), not its [L+1, V] array
    drawable = sorted({int(t) for t in options} | {int(t) for t in foil_opts if t != NONE})
    return Choice(pos, cands, ids, default, int(target), foil, drawable)
