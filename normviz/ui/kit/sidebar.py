"""The self-attention pages' sidebar: the model picker (free field or the deployment's allowlist), presentation
mode, the token cap; and the picker of a comparison's second model."""

from __future__ import annotations

import streamlit as st

from .messages import say
from .session_view import seed
from .settings import EMBEDDED_SEQ2SEQ
from .state import ViewState, check_model_allowed, model_allowlist, token_cap

EMBEDDED_CHOICES = ["minilm", "smollm2", "gemma3"]
OTHER = "Other (Hub id or local path)…"


def self_attention_models(allow) -> list[str]:
    """The allowlist without the embedded encoder–decoders (they have their own page, Translate)."""
    return [m for m in allow if m.strip().lower() not in EMBEDDED_SEQ2SEQ] or list(allow)


def sidebar(view: ViewState, seq2seq: bool = False) -> ViewState:
    """Model picker, stage mode and the token cap line. Returns the view with ``model`` and ``present``.
    ``seq2seq``: the page explains encoder–decoders too (Why), so the allowlist's are offered."""
    allow = model_allowlist()
    with st.sidebar:
        st.header("Model")
        if allow is not None:
            choices = list(allow) if seq2seq else self_attention_models(allow)
            current = view.model if view.model in choices else None
            if current is None and view.model:
                msg = check_model_allowed(view.model, allow)
                if msg:
                    say("error", msg)
                elif view.model.strip().lower() in {m.strip().lower() for m in allow}:  # an encoder–decoder
                    say(
                        "info",
                        f"{view.model} is an encoder–decoder (translation) model: open it on the Translate "
                        f"page (a source and a target text). This page shows {choices[0]} instead.",
                    )
            seed("w_model_choice", current or choices[0])
            if st.session_state["w_model_choice"] not in choices:
                st.session_state["w_model_choice"] = choices[0]
            view.model = st.selectbox(
                "Model", choices, key="w_model_choice", help="This deployment allows these models only."
            )
        else:
            choices = EMBEDDED_CHOICES + [OTHER]
            is_embedded = view.model.strip().lower() in EMBEDDED_CHOICES
            seed("w_model_choice", view.model.strip().lower() if is_embedded else OTHER)
            seed("w_model_other", "" if is_embedded else view.model)
            choice = st.selectbox(
                "Model",
                choices,
                key="w_model_choice",
                help="minilm (BERT, 6 layers), smollm2 (Llama, 30 layers) and gemma3 (Gemma-3-270M, "
                "18 layers; Gemma Terms of Use) are embedded and always work; any Hugging Face "
                "id or local directory also does (a model type without an architecture row: "
                "its raw attention).",
            )
            if choice == OTHER:
                other = st.text_input(
                    "Hub id or local path", key="w_model_other", placeholder="e.g. bert-base-uncased or /path/to/model"
                )
                view.model = other.strip() or view.model
                if not other.strip():
                    st.info("Type a Hub id (bert-base-uncased, gpt2 …) or a directory saved with save_pretrained.")
                    view.model = ""
            else:
                view.model = choice
        seed("w_present", view.present)
        view.present = st.toggle("Stage mode (larger fonts)", key="w_present")
        st.caption(f"Texts are cut at {token_cap()} tokens (NORMVIZ_MAX_TOKENS).")
    return view


def second_model_picker(current: str, main: str = "") -> str:
    """The model of a side-by-side comparison (``w_model_b``): the allowlist when there is one, else the
    embedded models. It starts on a model other than the ``main`` one where there is another (comparing a model
    with itself shows two equal columns)."""
    allow = model_allowlist()
    choices = self_attention_models(allow) if allow is not None else list(EMBEDDED_CHOICES)
    others = [c for c in choices if c.strip().lower() != main.strip().lower()]
    if current.strip().lower() == main.strip().lower() and others and "w_model_b" not in st.session_state:
        current = others[0]
    if current not in choices and "w_model_b" not in st.session_state and current:
        say(
            "warning",
            f"The link's model_b={current!r} is not one of {', '.join(choices)}; comparing with {choices[-1]}.",
        )
    seed("w_model_b", current if current in choices else choices[-1])
    if st.session_state["w_model_b"] not in choices:
        st.session_state["w_model_b"] = choices[-1]
    return st.selectbox("Second model", choices, key="w_model_b")
