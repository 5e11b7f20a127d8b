"""Streamlit glue shared by the pages: shared caches, the view in the URL, the sidebar, loading with progress.

Pages read top to bottom: widgets → :func:`load_model` → :func:`session_for` (one cached
:class:`normviz.Session` per model, text, pair and token cap) → :func:`get_maps` (``session.get(keys)``; a
refused key arrives in ``Analysis.refused`` and is shown in its panel's place) → figures from
:mod:`normviz.viz`. Errors meant for users (``normviz.errors.NormvizError``) become ``st.error`` boxes.
"""
from __future__ import annotations

import sys
import time
import traceback
import uuid
import warnings

import streamlit as st

import normviz
from normviz.errors import NormvizError, TruncationWarning
from normviz.methods import registry

from .cache import BoundedCache
from .memory import bound_heap
from .safe import lit, plain, redact
from .settings import settings
from .state import ViewState, check_model_allowed, model_allowlist, token_cap

bound_heap()  # the server process: large freed buffers go back to the system (normviz.ui.memory)
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


# --- every page runs inside this ----------------------------------------------------------------------

def run_page(body) -> None:
    """Run a page's ``body()``; an unexpected error becomes a short message (details in a collapsed section,
    none at all with ``NORMVIZ_PUBLIC=1``), never a traceback. Streamlit's own stop/rerun pass through."""
    from streamlit.runtime.scriptrunner_utils.exceptions import ScriptControlException

    conf = settings()
    if conf.public:
        try:
            st.set_option("client.showErrorDetails", "none")
        except Exception:  # pragma: no cover - older Streamlit
            pass
    try:
        body()
    except ScriptControlException:
        raise
    except Exception as exc:  # the top-level catch: nothing below reaches the visitor as a traceback
        ref = uuid.uuid4().hex[:8]
        print(f"normviz: unexpected error {ref} on {getattr(body, '__module__', '?')}:", file=sys.stderr)
        traceback.print_exc(file=sys.stderr)
        st.error(f"Something went wrong on this page (error {ref}). Change the input or reload the page; "
                 "if it keeps happening, tell the operator this error number.")
        if not conf.public:
            with st.expander("Details", expanded=False):
                st.text(f"{type(exc).__name__}: {shorten_error(exc)}")
                st.text("".join(traceback.format_exception(exc))[-4000:])


def shorten_error(exc: BaseException, limit: int = 300) -> str:
    text = str(exc)
    if settings().public:
        text = redact(text)
    return text if len(text) <= limit else text[:limit] + "…"


def say(kind: str, message: str) -> None:
    """``st.error``/``warning``/``info`` of a message that may hold visitor input: shown as plain text."""
    getattr(st, kind)(plain(message, limit=1200))


# --- view state ------------------------------------------------------------------------------------------

def load_view() -> ViewState:
    """The session's view: from the URL on the session's first run, then kept across pages."""
    ss = st.session_state
    if VIEW not in ss:
        view = ViewState.from_query(st.query_params.to_dict(), max_text_chars=settings().max_text_chars)
        ss[VIEW] = view
        ss["_normviz_problems"] = list(settings().problems) + list(view.problems)
    view = ss[VIEW]
    for p in ss.pop("_normviz_problems", []):
        say("warning", p)
    return view


def save_view(view: ViewState) -> None:
    st.session_state[VIEW] = view
    st.query_params.from_dict(view.to_query())


def seed(key: str, value) -> None:
    """Give widget ``key`` its value from the view unless the widget already holds one."""
    if key not in st.session_state:
        st.session_state[key] = value


def seed_index(key: str, value: int | None, n: int, what: str, fallback=None, fallback_text: str | None = None) -> None:
    """Seed widget ``key`` with a position 0 … n-1 from the link (None is kept). A value out of range is
    replaced, with a visible note: by ``fallback`` when ``fallback_text`` is given, else clamped into range.
    Only on the widget's first run (later the widget holds its own value)."""
    if key in st.session_state:
        return
    if value is None or 0 <= value < n:
        st.session_state[key] = value
        return
    if fallback_text is None:
        fallback = n - 1 if value >= n else 0
        fallback_text = f"{what} {fallback}"
    st.session_state[key] = fallback
    say("warning", f"The link's {what}={value} is out of range (0 … {n - 1}); showing {fallback_text}.")


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
                    say("error", msg)
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
        st.caption(f"**{plain(lm.name, 80)}** · {lm.spec.placement}-LN · {lm.n_layers} layers × {lm.n_heads} heads  \n"
                   f"device **{lm.device}** · dtype **{str(lm.dtype).replace('torch.', '')}**")


# --- loading ---------------------------------------------------------------------------------------------

def load_model(name: str):
    """The loaded model, or None after showing why not. A first load shows its progress."""
    msg = check_model_allowed(name, model_allowlist())
    if msg:
        say("error", msg)
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
        with slot.status(f"Loading {plain(key, 80)}… (first use only)", expanded=True) as status:
            def progress(message):
                status.text(str(message)[:300])
            lm = cache.get_or_compute(key, lambda: normviz.load(key, progress=progress))
        slot.empty()
        return lm
    except NormvizError as exc:
        slot.empty()
        say("error", _load_failure(key, exc))
    except Exception as exc:  # anything unexpected still reads as a message, never a traceback
        slot.empty()
        say("error", _load_failure(key, exc, unexpected=True))
    return None


def _path_like(name: str) -> bool:
    import os

    try:
        exists = os.path.exists(name)
    except (OSError, ValueError):
        exists = False
    return name.startswith((".", "/", "~", "\\")) or name.count("/") > 1 or "\\" in name or exists


def _load_failure(name: str, exc: Exception, unexpected: bool = False) -> str:
    """Why a model could not be loaded; for a name that looks like a server path the message is the same
    whether or not the directory exists, so the field cannot be used to explore the server's files."""
    if _path_like(name):
        return (f"Could not load {name[:200]!r}: it is not an embedded model ({', '.join(normviz.EMBEDDED)}) nor a "
                "model directory this server can load. (The server's operator can run `python -m normviz export "
                "--model DIR …` there for the exact reason.)")
    if unexpected:
        return f"Could not load {name[:200]!r}: {type(exc).__name__}: {shorten_error(exc)}"
    return shorten_error(exc, 600)


def session_options(lm) -> dict:
    """Options every session of this deployment gets: the cost budgets checked by the costly families before
    anything runs (NORMVIZ_FF_BUDGET seconds for the feed-forward maps, NORMVIZ_COST_BUDGET for value
    zeroing, ALTI, effective attention and DecompX; default 60 each)."""
    conf = settings()
    b = conf.cost_budget_s
    return {"ff_budget_s": conf.ff_budget_s, "value_zeroing_budget_s": b, "alti_budget_s": b,
            "effective_budget_s": b, "decompx_budget_s": b}


def session_for(lm, text: str, pair: str):
    """The shared session of this text (tokenised once; recorded on its first map), or None after an error
    box. A text cut at the token cap says so."""
    cap = token_cap()
    limit = settings().max_text_chars
    if len(text) + len(pair or "") > limit:  # cut before tokenising: bounded time and memory for any input
        say("warning", f"The text is {len(text) + len(pair or ''):,} characters long; only the first {limit:,} "
                       f"are analysed (NORMVIZ_MAX_TOKENS × 50).")
        text = text[:limit]
        pair = (pair or "")[:max(0, limit - len(text))]
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
        say("error", shorten_error(exc, 600))
        return None
    except Exception as exc:  # anything unexpected still reads as a message, never a traceback
        say("error", f"The text could not be prepared: {type(exc).__name__}: {shorten_error(exc)}")
        return None
    for note in notes:
        say("warning", note)
    return session


def get_maps(session, keys: list[str]):
    """``session.get(keys)`` with a progress bar while anything is computed; refusals per key in
    ``Analysis.refused``. None (after an error box) if the analysis itself failed."""
    keys = [k for k in dict.fromkeys(keys) if k in registry.all_keys()]
    missing = [k for k in keys if k not in session.computed()]
    bar = st.empty() if missing else None
    waited = _wait_for_model(session.lm) if missing else 0.0
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
        say("error", shorten_error(exc, 600))
        return None
    except Exception as exc:  # never a traceback in the page
        if bar is not None:
            bar.empty()
        say("error", f"The analysis failed: {type(exc).__name__}: {shorten_error(exc)}")
        return None
    if waited >= 0.5:
        st.caption(f"Waited {waited:.1f} s for another visitor's analysis on this model before this one could start.")
    return analysis


def _wait_for_model(lm) -> float:
    """If another request holds this model's lock (recording a pass or rerunning layers), say so while waiting
    for it; the seconds waited (0 when it was free). The lock is released again at once: the session takes it
    itself only around what hooks the shared model."""
    from normviz.record import model_lock

    lock = model_lock(lm.model)
    if lock.acquire(blocking=False):
        lock.release()
        return 0.0
    note = st.empty()
    note.info("Another visitor's analysis is using this model; yours starts when it is done…")
    t0 = time.perf_counter()
    with lock:
        pass
    note.empty()
    return time.perf_counter() - t0


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
