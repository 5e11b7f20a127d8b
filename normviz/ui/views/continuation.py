"""The Why page's Continuation view: a whole continuation explained (``Session.explain_continuation``).

The generated text as a row of tokens (a click picks a step), the steps × tokens heatmap of every earlier
token's exact part in each step's logit (stage-sized; the chosen step outlined; a click on any cell of a row
picks that row's step), and the chosen step's own Why panels below it: the page explains the text +
continuation at that step's position, so candidates, heads, lens and graph are the existing ones. ←/→ on stage
walk the steps (:func:`section` gives the page the step positions for its keyboard). URL: ``steps`` (0 = off),
``continuation`` (given, teacher-forced), ``cfoil``.
"""

from __future__ import annotations

import numpy as np

from .why import MAX_STEPS

DEFAULT_STEPS = 20
STEP_KEY = "w_why_cont_step"
POS_KEY = "w_why_pos"
ROW_CLICK_KEY = "nv_cont_row_click"


def not_a_decoder(lm) -> str | None:
    """Why ``lm`` continues no text (None when it does)."""
    if getattr(lm, "is_encoder_decoder", False):
        return None
    if not lm.spec.causal or getattr(lm, "head_model", None) is None:
        return (
            f"{lm.name} is not a decoder: a continuation is generated token by token by a causal language model "
            "(such as smollm2)."
        )
    return None


def section(lm, session, view, wv, fs, chosen=None):
    """Draw the Continuation view (when on) and give (the session of text + continuation, the step
    positions in it) for the page's Why panels, or None (off, or nothing to explain: a message says why).
    ``chosen``: the model picked in the sidebar when the page shows another (one without an LM head)."""
    import streamlit as st

    from ...core.errors import NormvizError
    from ...viz.labels import unique_labels
    from ...viz.why import shown
    from ..kit import st_parts as ui
    from ..kit.memo import memoised
    from . import why as W

    on = st.toggle(
        "Explain a whole continuation",
        value=wv.steps > 0,
        key="w_why_cont_on",
        help="Generate (or give) the next tokens and see where every one of them came from.",
    )
    if not on:
        if wv.steps:
            wv.steps = 0
            W.save_why(view, wv)
        return None
    if chosen is not None and (why := not_a_decoder(chosen)):
        ui.say("info", f"{why} The continuation below is {lm.name}'s.")
    if (why := not_a_decoder(lm)) is not None:
        ui.say("info", why)
        return None
    steps, given, runner = _controls(wv)
    W.save_why(view, wv)
    foil = "runner-up" if runner else None
    args = dict(continuation=given) if given else dict(max_new_tokens=int(steps))
    try:
        c = memoised(
            session,
            ("why_continuation", given or int(steps), foil),
            lambda: session.explain_continuation(**args, foil=foil),
        )
    except NormvizError as exc:
        ui.say("error", str(exc))
        return None
    ext = ui.session_for(lm, view.text + c.text) if len(c) > 1 else session
    if ext is None:
        return None
    ids = list(ext.encoded.ids)
    want = c.column_ids.tolist() + c.generated_ids[-1:].tolist()
    positions = [int(p) for p in c.positions]
    same = ids[: len(c.column_ids)] == c.column_ids.tolist() or len(c) == 1
    _follow_clicks_and_position(positions, same)

    def picked():
        st.session_state[POS_KEY] = positions[int(st.session_state[STEP_KEY] or 0)]

    # one label per step ('␣the', '␣the·2'): the browser keeps the picker's value by its label, so a repeated
    # token would open its last occurrence (a 20-token continuation opened step 16, not 0)
    labels = unique_labels([shown(t) for t in c.tokens])
    step = st.segmented_control(
        "The continuation, one step per token (click a step for its panels below)",
        list(range(len(c))),
        key=STEP_KEY,
        format_func=lambda t: labels[t],
        on_change=picked if same else None,
    )
    step = 0 if step is None else int(step)
    _draw_steps(c, lm, view, step, positions, fs, foil)
    if not same or ids[: len(want) - 1] != want[:-1]:
        ui.say(
            "info",
            "The continuation's text tokenises differently when typed, so the per-step panels below "
            "explain the text's last position; the heatmap above is exact for the generated ids.",
        )
        return None
    if st.session_state.get(POS_KEY) not in positions or wv.position not in positions:
        st.session_state[POS_KEY] = positions[step]
        wv.position = positions[step]
    return ext, positions


def _draw_steps(c, lm, view, step: int, positions: list[int], fs: int, foil) -> None:
    """The steps × tokens heatmap of the continuation (row t: step t's sources), and below it the check of
    step ``step``'s row sum against its total."""
    import streamlit as st

    from ...viz.continuation import steps_heatmap
    from ..kit import st_parts as ui

    what = "logit − the runner-up's" if foil else "logit"
    fig = steps_heatmap(
        c.sources,
        c.tokens,
        c.columns,
        first_generated=positions[0] + 1 if len(c) > 1 else None,
        focus=step,
        font_size=fs,
        present=view.present,
        width=ui.panel_width(1, view.present),
        title=f"Where each generated token came from ({what})",
    )
    ui.context_line(fig, lm.name, view.text, fs)
    ui.chart(fig, key="continuation", filename="normviz_why_continuation")
    if not view.present:
        row = np.nansum(c.sources[step]) + c.bias[step]
        st.caption(
            ui.plain(
                f"{c.note}. Row t: every earlier token's exact part in step t's {what}; each row plus "
                f"its bias is the step's total (step {step}: {row:.4f} = {c.totals[step]:.4f}). Grey: "
                "tokens after the step. The dotted line: where the continuation begins.",
                None,
            )
        )


def _follow_clicks_and_position(positions: list[int], same: bool) -> None:
    """The chosen step follows a click on a heatmap row (its panels below follow the page's position) and the
    page's position (←/→ on stage move it); step 0 when nothing chose one."""
    import streamlit as st

    from ..kit import st_parts as ui

    row = ui.row_clicks("continuation", key=ROW_CLICK_KEY)
    if row is not None and 0 <= row < len(positions):
        st.session_state[STEP_KEY] = row
        if same:
            st.session_state[POS_KEY] = positions[row]
    pos_now = st.session_state.get(POS_KEY)
    if pos_now in positions and st.session_state.get(STEP_KEY) != positions.index(pos_now):
        st.session_state[STEP_KEY] = positions.index(pos_now)
    ui.seed(STEP_KEY, 0)


def _controls(wv):
    """How many tokens, or a given continuation, and the runner-up foil; written into ``wv``. Gives them."""
    import streamlit as st

    from ..kit import st_parts as ui

    c1, c2, c3 = st.columns([1, 3, 2], vertical_alignment="bottom")
    ui.seed("w_why_cont_T", wv.steps or DEFAULT_STEPS)
    ui.seed("w_why_cont_text", wv.continuation)
    ui.seed("w_why_cont_foil", wv.cfoil == "runner-up")
    with c1:
        steps = st.number_input("Tokens", 1, MAX_STEPS, key="w_why_cont_T", help="How many tokens to generate.")
    with c2:
        given = st.text_input(
            "… or explain this continuation (teacher-forced)",
            key="w_why_cont_text",
            max_chars=400,
            help="Leave empty for the model's own greedy continuation.",
        )
    with c3:
        runner = st.toggle(
            "Each step against its runner-up",
            key="w_why_cont_foil",
            help="Explain logit(token) − logit(the step's best other token).",
        )
    wv.steps, wv.continuation, wv.cfoil = int(steps), str(given), "runner-up" if runner else ""
    return steps, given, runner


def seq2seq_section(lm, session, view, wv, fs) -> None:
    """The encoder–decoder branch (toy-mt): the whole translation explained (``explain_continuation()`` of the
    session's own target: each target token over the source and the target tokens before it, exact), as the steps ×
    tokens heatmap above the page's "Target word" box; a click on a row picks that target word. Call it before the
    box is drawn (the click moves the box)."""
    import streamlit as st

    from ...core.errors import NormvizError
    from ...viz.continuation import steps_heatmap
    from ..kit import st_parts as ui
    from ..kit.memo import memoised
    from . import why as W

    on = st.toggle(
        "Explain the whole translation",
        value=wv.steps > 0,
        key="w_why_cont_on",
        help="Where every target token came from: the source and the target tokens before it.",
    )
    if bool(wv.steps) != on:
        wv.steps = 1 if on else 0
        W.save_why(view, wv)
    if not on:
        return
    try:
        c = memoised(session, ("why_translation",), lambda: session.explain_continuation())
    except NormvizError as exc:
        ui.say("error", str(exc))
        return
    n_rows = len(session.tgt_tokens)
    row = ui.row_clicks("continuation", key=ROW_CLICK_KEY)
    if row is not None and 0 <= row < min(len(c), n_rows):
        st.session_state[POS_KEY] = row
    pos = st.session_state.get(POS_KEY, wv.position or 0)
    fig = steps_heatmap(
        c.sources,
        c.tokens,
        ["src " + t if k < c.n_source else "tgt " + t for k, t in enumerate(c.columns)],
        first_generated=c.n_source if len(c) > 1 else None,
        focus=pos if isinstance(pos, int) and 0 <= pos < len(c) else None,
        font_size=fs,
        present=view.present,
        width=ui.panel_width(1, view.present),
        title="Where each target token came from (logit): the source and the target before it",
    )
    ui.context_line(fig, lm.name, view.text, fs)
    ui.chart(fig, key="continuation", filename="normviz_why_translation")
    if not view.present:
        st.caption(
            ui.plain(
                f"{c.note}. Row t: every source token's and every earlier target token's exact part "
                "in target token t's logit; each row plus its bias is the logit. Grey: target tokens "
                "after the step. The dotted line: where the target begins. Click a row for its word "
                "below.",
                None,
            )
        )


__all__ = ["DEFAULT_STEPS", "MAX_STEPS", "not_a_decoder", "section", "seq2seq_section"]
