"""Streamlit glue shared by the pages: shared caches, the view in the URL, the sidebar, loading with progress.

Pages read top to bottom: widgets → :func:`load_model` → :func:`session_for` (one cached
:class:`normviz.Session` per model, text, pair and token cap) → :func:`get_maps` (``session.get(keys)``; a
refused key arrives in ``Analysis.refused`` and is shown in its panel's place) → figures from
:mod:`normviz.viz`. Errors meant for users (``normviz.errors.NormvizError``) become ``st.error`` boxes.
"""
from __future__ import annotations

import os
import warnings

import streamlit as st

import normviz
from normviz.errors import NormvizError, TruncationWarning
from normviz.methods import registry

from .cache import BoundedCache
from .state import ViewState, check_model_allowed, model_allowlist, token_cap

VIEW = "_normviz_view"
EMBEDDED_CHOICES = ["minilm", "smollm2"]
OTHER = "Other (Hub id or local path)…"
SESSION_ENTRIES = 12  # each keeps its records (one forward pass's tensors) and the maps computed so far


@st.cache_resource(show_spinner=False)
def model_cache() -> BoundedCache:
    """Loaded models, shared by every session and never mutated (at most 3 kept)."""
    return BoundedCache(3)


@st.cache_resource(show_spinner=False)
def session_cache() -> BoundedCache:
    """Sessions keyed on (model source, revision, device, dtype, text, pair, token cap, options), shared by
    every visitor: a text analysed once is never recorded again, and each map of it is computed once."""
    return BoundedCache(SESSION_ENTRIES)


# --- view state ------------------------------------------------------------------------------------------

def load_view() -> ViewState:
    """The session's view: from the URL on the session's first run, then kept across pages."""
    ss = st.session_state
    if VIEW not in ss:
        view = ViewState.from_query(st.query_params.to_dict())
        ss[VIEW] = view
        ss["_normviz_problems"] = list(view.problems)
    view = ss[VIEW]
    for p in ss.pop("_normviz_problems", []):
        st.warning(p)
    return view


def save_view(view: ViewState) -> None:
    st.session_state[VIEW] = view
    st.query_params.from_dict(view.to_query())


def seed(key: str, value) -> None:
    """Give widget ``key`` its value from the view unless the widget already holds one."""
    if key not in st.session_state:
        st.session_state[key] = value


def font_size(view: ViewState) -> int:
    return 18 if view.present else 12


def apply_style(view: ViewState) -> None:
    st.html("""<style>
        [data-testid="stMainBlockContainer"] { padding-top: 4rem; padding-bottom: 2rem; }
        [data-testid="stSidebarHeader"] { height: 1.2rem; margin-bottom: 0; }
    </style>""")
    if view.present:
        st.html("""<style>
            html, body, [data-testid="stAppViewContainer"] { font-size: 20px; }
            [data-testid="stMarkdownContainer"] p, label, .stCaption { font-size: 1.15rem !important; }
            h1 { font-size: 2.6rem !important; }
        </style>""")


# --- sidebar ---------------------------------------------------------------------------------------------

def sidebar(view: ViewState) -> ViewState:
    """Model picker, presentation mode and the device line. Returns the view with ``model`` and ``present``."""
    allow = model_allowlist()
    with st.sidebar:
        st.header("Model")
        if allow is not None:
            choices = list(allow)
            current = view.model if view.model in choices else None
            if current is None and view.model:
                msg = check_model_allowed(view.model, allow)
                if msg:
                    st.error(msg)
            seed("w_model_choice", current or choices[0])
            if st.session_state["w_model_choice"] not in choices:
                st.session_state["w_model_choice"] = choices[0]
            view.model = st.selectbox("Model", choices, key="w_model_choice",
                                      help="This deployment allows these models only.")
        else:
            choices = EMBEDDED_CHOICES + [OTHER]
            is_embedded = view.model.strip().lower() in EMBEDDED_CHOICES
            seed("w_model_choice", view.model.strip().lower() if is_embedded else OTHER)
            seed("w_model_other", "" if is_embedded else view.model)
            choice = st.selectbox("Model", choices, key="w_model_choice",
                                  help="minilm (BERT, 6 layers) and smollm2 (Llama, 30 layers) are embedded and "
                                       "always work; any supported Hugging Face id or local directory also does.")
            if choice == OTHER:
                other = st.text_input("Hub id or local path", key="w_model_other",
                                      placeholder="e.g. bert-base-uncased or /path/to/model")
                view.model = other.strip() or view.model
                if not other.strip():
                    st.info("Type a Hub id (bert-base-uncased, gpt2 …) or a directory saved with save_pretrained.")
                    view.model = ""
            else:
                view.model = choice
        seed("w_present", view.present)
        view.present = st.toggle("Presentation mode (larger fonts)", key="w_present")
        st.caption(f"Texts are cut at {token_cap()} tokens (NORMVIZ_MAX_TOKENS).")
    return view


def show_device(lm) -> None:
    with st.sidebar:
        st.caption(f"**{lm.name}** · {lm.spec.placement}-LN · {lm.n_layers} layers × {lm.n_heads} heads  \n"
                   f"device **{lm.device}** · dtype **{str(lm.dtype).replace('torch.', '')}**")


# --- loading ---------------------------------------------------------------------------------------------

def load_model(name: str):
    """The loaded model, or None after showing why not. A first load shows its progress."""
    msg = check_model_allowed(name, model_allowlist())
    if msg:
        st.error(msg)
        return None
    if not name.strip():
        st.error("No model chosen: pick one in the sidebar.")
        return None
    key = name.strip().lower() if name.strip().lower() in normviz.EMBEDDED else name.strip()
    cache = model_cache()
    if key in cache:
        return cache.get(key)
    slot = st.empty()
    try:
        with slot.status(f"Loading {key}… (first use only)", expanded=True) as status:
            def progress(message):
                status.write(message)
            lm = cache.get_or_compute(key, lambda: normviz.load(key, progress=progress))
        slot.empty()
        return lm
    except NormvizError as exc:
        slot.empty()
        st.error(str(exc))
    except Exception as exc:  # anything unexpected still reads as a message, never a traceback
        slot.empty()
        st.error(f"Could not load {name!r}: {type(exc).__name__}: {exc}")
    return None


def session_options(lm) -> dict:
    """Options every session of this deployment gets: the FF cost budget on a CPU (NORMVIZ_FF_BUDGET seconds,
    default 60), checked by the feedforward family before anything runs."""
    try:
        budget = float(os.environ.get("NORMVIZ_FF_BUDGET", "60"))
    except ValueError:
        budget = 60.0
    return {"ff_budget_s": budget}


def session_for(lm, text: str, pair: str):
    """The shared session of this text (tokenised once; recorded on its first map), or None after an error
    box. A text cut at the token cap says so."""
    cap = token_cap()
    options = session_options(lm)
    key = lm.cache_key + (text, pair, cap, tuple(sorted(options.items())))

    def make():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TruncationWarning)
            session = normviz.Session(lm, text, pair or None, max_tokens=cap, options=options)
        notes = [f"{w.message} Set NORMVIZ_MAX_TOKENS to change the limit." for w in caught
                 if issubclass(w.category, TruncationWarning)]
        return session, notes

    try:
        session, notes = session_cache().get_or_compute(key, make)
    except NormvizError as exc:
        st.error(str(exc))
        return None
    except Exception as exc:  # anything unexpected still reads as a message, never a traceback
        st.error(f"The text could not be prepared: {type(exc).__name__}: {exc}")
        return None
    for note in notes:
        st.warning(note)
    return session


def get_maps(session, keys: list[str]):
    """``session.get(keys)`` with a progress bar while anything is computed; refusals per key in
    ``Analysis.refused``. None (after an error box) if the analysis itself failed."""
    keys = [k for k in dict.fromkeys(keys) if k in registry.all_keys()]
    missing = [k for k in keys if k not in session.computed()]
    bar = st.empty() if missing else None
    try:
        if bar is not None:
            prog = bar.progress(0.0, text=f"Analysing ({', '.join(missing)})…")
            analysis = session.get(keys, strict=False,
                                   progress=lambda f, m: prog.progress(min(1.0, f), text=f"Analysing: {m}"))
            bar.empty()
        else:
            analysis = session.get(keys, strict=False)
    except NormvizError as exc:
        if bar is not None:
            bar.empty()
        st.error(str(exc))
        return None
    except Exception as exc:  # never a traceback in the page
        if bar is not None:
            bar.empty()
        st.error(f"The analysis failed: {type(exc).__name__}: {exc}")
        return None
    return analysis


def default_keys(lm) -> list[str]:
    return registry.all_keys(lm.spec.placement, include_opt_in=False)


def opt_in_keys(lm) -> list[str]:
    every = registry.all_keys(lm.spec.placement, include_opt_in=True)
    cheap = set(default_keys(lm))
    return [k for k in every if k not in cheap]


def title(key: str) -> str:
    try:
        return registry.key_info(key).title
    except NormvizError:
        return key
