"""Learn's lesson "find the induction circuit": draws :func:`normviz.circuits.lesson.k_composition` (the induction
head's score split on the key side, K-composition) on the shipped induction benchmark; nothing is computed here."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

TITLE = "Find the induction circuit"
TOGGLE = "w_learn_induction"
LESSON = "induction"  # ?lesson=induction opens the lesson (at the top of the Learn page, already running)


def opens(lesson) -> bool:
    """Whether a link's ``lesson=`` names this lesson."""
    return lesson == LESSON


INTRO = (
    "A small model trained to continue repeated text (the shipped **induction** benchmark of the Trust page's "
    "Known circuits) predicts the next token by finding the token's earlier occurrence and copying what came after "
    "it. Two heads do this together. A **previous-token head** in layer 0 copies each token's predecessor into "
    "that token's state. An **induction head** in layer 1 then matches its query (the current token) against every "
    "key: the key that carries the *same* token as its predecessor wins. The induction head's key is thus written "
    "by the previous-token head: **K-composition**. `Session.attend` splits the head's score "
    "s = c·⟨q_query, k_key⟩ exactly over what wrote the key's residual state, so we can see it."
)

SHOWS = (
    "**Shows:** which earlier component (the embedding, a layer-0 head, layer 0's FF block) wrote the part of the "
    "key that makes the induction head's score high, and from which source token. **Hides:** the query side "
    "(summed here), and the softmax: the score is before it, the attention row after it."
)


def bars(names: list[str], values, marked: set[str], title: str, font_size: int = 14) -> go.Figure:
    colors = ["#d62728" if n in marked else "#1f77b4" for n in names]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=np.asarray(values, dtype=float),
            marker_color=colors,
            hovertemplate="%{x}: %{y:.3f}<extra></extra>",
        )
    )
    fig.update_layout(
        title=title,
        font={"size": font_size},
        height=360,
        showlegend=False,
        yaxis_title="part of the score",
        margin={"b": 80},
    )
    return fig


def component_figure(k, font_size: int = 14) -> go.Figure:
    marked = {f"L{l}.H{h}" for l, h in k.previous_token}
    return bars(
        k.components,
        k.key_side,
        marked,
        f"Key side of L{k.layer}.H{k.head}'s score, by component (red: previous-token heads)",
        font_size,
    )


def token_names(k) -> list[str]:
    return [f"{t} [{i}]" for i, t in enumerate(k.labels)] + ["biases"]


def token_figure(k, font_size: int = 14) -> go.Figure:
    names = token_names(k)
    return bars(
        names,
        k.key_tokens,
        {names[k.earlier]},
        "… by source token (red: the query token's earlier occurrence)",
        font_size,
    )


def attention_figure(k, font_size: int = 14) -> go.Figure:
    names = token_names(k)[: len(k.labels)]
    return bars(
        names,
        k.attention,
        {names[k.key]},
        f"L{k.layer}.H{k.head}'s attention from the last token (red: the key after the earlier occurrence)",
        font_size,
    )


def render(ui, st, font_size: int = 14, opened: bool = False) -> None:
    """The lesson (Learn page hook): a toggle (the benchmark's model loads on demand), then the three charts.
    ``opened`` (the link said ``lesson=induction``): the toggle starts on."""
    from ...circuits import load, names
    from ...circuits.lesson import k_composition

    st.subheader(TITLE)
    if "induction" not in names():
        st.caption("The induction benchmark is not shipped here (scripts/train_circuits.py writes it).")
        return
    st.markdown(INTRO)
    if opened:
        st.session_state.setdefault(TOGGLE, True)
    if not st.toggle("Run it on the induction benchmark", key=TOGGLE):
        return
    bench = load("induction")
    induction = bench.roles["induction"]
    c1, c2 = st.columns(2)
    with c1:
        example = st.selectbox(
            "Example",
            list(range(len(bench.examples))),
            key="w_learn_induction_example",
            format_func=lambda e: f"example {e}",
        )
    with c2:
        head = st.selectbox(
            "Induction head",
            [h for _, h in induction],
            key="w_learn_induction_head",
            format_func=lambda h: f"L{induction[0][0]}.H{h}",
        )
    k = k_composition(example, head, bench)
    st.caption("Tokens: " + ui.plain(" · ".join(f"{t} [{i}]" for i, t in enumerate(k.labels)), None))
    st.markdown(
        ui.plain(
            f"Query: the last token {k.labels[k.query]!r} [{k.query}]. It occurred before at [{k.earlier}]; the key "
            f"after it is {k.labels[k.key]!r} [{k.key}], the token to predict. The head's score there is "
            f"{k.total:.3f} (the model's own q·k: {k.model_score:.3f}); its highest score over all keys is at "
            f"[{int(np.argmax(k.scores))}], and its attention there is {k.attention[k.key]:.1%}.",
            None,
        )
    )
    ui.chart(attention_figure(k, font_size), key="learn_induction_attention", filename="induction_attention")
    left, right = st.columns(2)
    with left:
        ui.chart(component_figure(k, font_size), key="learn_induction_components", filename="induction_key_components")
    with right:
        ui.chart(token_figure(k, font_size), key="learn_induction_tokens", filename="induction_key_tokens")
    top = ", ".join(f"{c} {v:.2f}" for c, v in k.ranked(3))
    st.markdown(
        ui.plain(
            f"The previous-token heads ({', '.join(f'L{l}.H{h}' for l, h in k.previous_token)}) write "
            f"{k.previous_share:.0%} of the score through the key's state (largest parts: {top}); by source token, "
            f"{k.key_tokens[k.earlier] / k.total:.0%} comes from [{k.earlier}], the query token's earlier occurrence: "
            "the previous-token head moved it into the key's state, where the induction head's query finds it.",
            None,
        )
    )
    st.markdown(SHOWS)
