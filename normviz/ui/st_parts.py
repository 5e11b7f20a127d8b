"""Streamlit glue shared by the pages: shared caches, the view in the URL, the sidebar, loading with progress.

Pages read top to bottom: widgets → :func:`load_model` → :func:`session_for` (one cached
:class:`normviz.Session` per model, text, pair and token cap) → :func:`get_maps` (``session.get(keys)``; a
refused key arrives in ``Analysis.refused`` and is shown in its panel's place) → figures from
:mod:`normviz.viz`. Errors meant for users (``normviz.errors.NormvizError``) become ``st.error`` boxes.
"""
from __future__ import annotations

import json
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
    if forget_widgets_on_page_change():  # a page link's query (e.g. Learn's lesson, a head to open) applies
        view = ViewState.from_query(st.query_params.to_dict(), base=view, max_text_chars=settings().max_text_chars)
        ss[VIEW] = view
        for p in view.problems:
            say("warning", p)
    for p in ss.pop("_normviz_problems", []):
        say("warning", p)
    from .url_check import notice_dropped_query

    notice_dropped_query(say)  # Streamlit drops a query string over 524,288 characters without a word
    return view


def current_page() -> str:
    """An id of the page this run draws (Streamlit's page hash: one per page under ``st.navigation``)."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx()
    return getattr(ctx, "page_script_hash", "") or "" if ctx is not None else ""


def forget_widgets_on_page_change() -> bool:
    """On the first run of a page after another page, drop every widget value (``w_*`` keys) so the page's
    widgets are seeded from the shared view again. A widget's value belongs to the page that drew it:
    Streamlit gives the same key on another page a new widget, which would start empty (the text was lost
    between Explore and Overview, issue 13) -- the view, kept in session state and the URL, is what pages share.
    True when the page changed (not on the session's first run)."""
    ss = st.session_state
    page = current_page()
    if ss.get("_normviz_page") == page:
        return False
    changed = "_normviz_page" in ss
    if changed:
        for k in [k for k in ss if isinstance(k, str) and k.startswith("w_")]:
            del ss[k]
    ss["_normviz_page"] = page
    return changed


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


def start_page() -> tuple[ViewState, int]:
    """What every page does first: the shared view (URL / session), the sidebar, the style of its mode;
    returns the view and the font size of its figures."""
    view = sidebar(load_view())
    apply_style(view.present)
    return view, font_size(view)


def apply_style(present: bool = False) -> None:
    """The pages' CSS: the main column uses the page width; presentation mode's larger fonts."""
    st.html("""<style>
        [data-testid="stMainBlockContainer"] { padding: 4rem 1.5rem 2rem 1.5rem; max-width: none; }
        [data-testid="stSidebarHeader"] { height: 1.2rem; margin-bottom: 0; }
    </style>""")
    if present:
        st.html("""<style>
            html, body, [data-testid="stAppViewContainer"] { font-size: 20px; }
            [data-testid="stMarkdownContainer"] p, label, .stCaption { font-size: 1.15rem !important; }
            h1 { font-size: 2.6rem !important; }
        </style>""")


# --- sidebar ---------------------------------------------------------------------------------------------

def self_attention_models(allow) -> list[str]:
    """The allowlist without the embedded encoder–decoders (they have their own page, Translate)."""
    from .settings import EMBEDDED_SEQ2SEQ

    return [m for m in allow if m.strip().lower() not in EMBEDDED_SEQ2SEQ] or list(allow)


def sidebar(view: ViewState) -> ViewState:
    """Model picker, presentation mode and the device line. Returns the view with ``model`` and ``present``."""
    allow = model_allowlist()
    with st.sidebar:
        st.header("Model")
        if allow is not None:
            choices = self_attention_models(allow)
            current = view.model if view.model in choices else None
            if current is None and view.model:
                msg = check_model_allowed(view.model, allow)
                if msg:
                    say("error", msg)
                elif view.model.strip().lower() in {m.strip().lower() for m in allow}:  # an encoder–decoder
                    say("info", f"{view.model} is an encoder–decoder (translation) model: open it on the Translate "
                                f"page (a source and a target text). This page shows {choices[0]} instead.")
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
    zeroing, ALTI, effective attention, GlobEnc and DecompX; default 60 each)."""
    conf = settings()
    b = conf.cost_budget_s
    return {"ff_budget_s": conf.ff_budget_s, "value_zeroing_budget_s": b, "alti_budget_s": b,
            "effective_budget_s": b, "globenc_budget_s": b, "decompx_budget_s": b}


def cut_note(text: str, pair: str, limit: int) -> str:
    """What cutting ``text`` + ``pair`` to ``limit`` characters does, said of both boxes: the pair dropped
    when the first text fills the limit, or cut, or the text alone cut."""
    why = f"(at most {limit:,} characters are analysed: NORMVIZ_MAX_TOKENS × 50)"
    if not pair:
        return f"The text is {len(text):,} characters long; only the first {limit:,} are analysed (NORMVIZ_MAX_TOKENS × 50)."
    if len(text) >= limit:
        return (f"Both boxes are full: the first text alone is {len(text):,} characters, so the second text "
                f"({len(pair):,} characters) was dropped and the first is analysed alone"
                f"{', cut to its first ' + format(limit, ',') + ' characters' if len(text) > limit else ''}, not as a "
                f"pair {why}.")
    kept = limit - len(text)
    return (f"The two texts are {len(text) + len(pair):,} characters together: the second is cut to its first "
            f"{kept:,} of {len(pair):,} characters {why}.")


def session_for(lm, text: str, pair: str):
    """The shared session of this text (tokenised once; recorded on its first map), or None after an error
    box. A text cut at the token cap says so. An encoder–decoder model is pointed to the Translate page (its
    maps need a source and a target, and its keys are ``encoder_*``/``decoder_*``/``cross_*``)."""
    if getattr(lm, "is_encoder_decoder", False):
        say("info", f"{lm.name} is an encoder–decoder (translation) model: its encoder, decoder and "
                    "cross-attention maps are on the Translate page, with a source and a target text.")
        return None
    cap = token_cap()
    limit = settings().max_text_chars
    if len(text) + len(pair or "") > limit:  # cut before tokenising: bounded time and memory for any input
        say("warning", cut_note(text, pair or "", limit))
        text = text[:limit]
        pair = (pair or "")[:max(0, limit - len(text))]
    options = session_options(lm)
    key = lm.cache_key + (text, pair, cap, tuple(sorted(options.items())))

    def make():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TruncationWarning)
            session = normviz.Session(lm, text, pair or None, max_tokens=cap, options=options, worker=heavy_worker())
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
    notice_waited(analysis)
    return analysis


def notice_waited(analysis, at_least_s: float = 0.5) -> None:
    """Say how long this request waited for other visitors' analyses (``Analysis.waited_s``: the same text's
    shared session busy, or the heavy-methods worker busy with another visitor's job), when it did."""
    waited = float(getattr(analysis, "waited_s", 0.0) or 0.0)
    if waited >= at_least_s:
        st.info(f"This analysis waited {waited:.1f} s for other visitors' analyses before it could run "
                "(the server computes costly maps one visitor at a time).")


def heavy_worker():
    """The server's worker process(es) for the costly maps (NORMVIZ_HEAVY_WORKERS; None: 0, all in-process)."""
    from normviz.workers import shared_worker

    return shared_worker(settings().heavy_workers)


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


# --- issue 13: the talk-ready app (page config, map picker, panel captions, links between pages) ------------

def page_config(title: str, icon: str) -> None:
    """``st.set_page_config`` for a page: wide; in presentation mode (``?present=1``) the sidebar starts
    collapsed, so two large panels fill the screen."""
    present = str(st.query_params.get("present", "")).strip().lower() in ("1", "true", "yes", "on")
    if VIEW in st.session_state:
        present = bool(st.session_state[VIEW].present)
    st.set_page_config(page_title=f"normviz · {title}", page_icon=icon, layout="wide",
                       initial_sidebar_state="collapsed" if present else "auto")


def map_picker(current: tuple[str, ...], available: list[str], default: list[str]) -> tuple[str, ...]:
    """The maps shown side by side, picked in three groups (per layer / across layers / alternatives), each
    a row of pills (keys ``w_maps``, ``w_maps_across``, ``w_maps_alt``). Returns them in the order picked."""
    from . import data

    groups = data.grouped(available)
    keys = {"per layer": "w_maps", "across layers": "w_maps_across", "alternatives": "w_maps_alt"}
    helps = {"per layer": "Kobayashi et al.: one layer's attention block, step by step, then the feed-forward block.",
             "across layers": "Maps chained through the layers up to the chosen one: which input tokens a token "
                              "is made of.",
             "alternatives": "Other methods' per-layer maps, to compare with the norm-based ones."}
    chosen = [k for k in current if k in available]
    if not chosen and "w_maps" not in st.session_state:
        chosen = [k for k in default if k in available]
    out: list[str] = []
    for group, options in groups.items():
        if not options:
            continue
        key = keys[group]
        seed(key, [k for k in chosen if k in options])
        st.session_state[key] = list(dict.fromkeys(k for k in st.session_state[key] if k in options))
        picked = st.pills(group.capitalize(), options, selection_mode="multi", key=key, format_func=data.short_label,
                          help=helps[group])
        out.extend(picked or [])
    order = {k: i for i, k in enumerate(current)}
    return tuple(sorted(dict.fromkeys(out), key=lambda k: order.get(k, len(order) + out.index(k))))


def learn_link(key: str, label: str = "Learn more") -> None:
    """A link to the map's tab on the Learn page (the view travels in session state; ``lesson`` picks the tab)."""
    link_to_page("app_pages/2_Learn.py", f"{label} ↗", {"lesson": key})


def link_to_page(path: str, label: str, changes: dict) -> None:
    """A link to another page of the app that carries the current view with ``changes`` applied (a page link
    under ``st.navigation``; when a page runs on its own, a plain link to the same query)."""
    from dataclasses import replace as _replace

    view = st.session_state.get(VIEW) or ViewState()
    view = _replace(view, **{k: v for k, v in changes.items() if k in ViewState.__dataclass_fields__})
    query = view.to_query()
    try:
        st.page_link(path, label=label, query_params=query)
    except Exception:  # no navigation (a page run on its own): a plain link with the same query
        from urllib.parse import urlencode

        url_path = "" if "0_" in path else path.rsplit("_", 1)[-1].removesuffix(".py")
        st.link_button(label, "./" + url_path + ("?" + urlencode(query) if query else ""))


def image_format() -> str:
    """The chart toolbar's download format, PNG or SVG (the sidebar's choice, ``w_img``; not in the URL)."""
    return st.session_state.get("w_img", "png")


def chart(fig, key: str, filename: str, width: str = "stretch") -> None:
    """``st.plotly_chart`` whose toolbar camera downloads ``filename`` as PNG or SVG (:func:`image_format`);
    a figure that set its own width (many tokens need more room than the column) keeps it."""
    from normviz import viz

    own = getattr(fig.layout, "width", None)
    st.plotly_chart(fig, key=key, config=viz.plotly_config(filename=filename, fmt=image_format()),
                    width="content" if own else width)


def second_model_picker(current: str) -> str:
    """The model of a side-by-side comparison (``w_model_b``): the allowlist when there is one, else the
    embedded models."""
    allow = model_allowlist()
    choices = self_attention_models(allow) if allow is not None else list(EMBEDDED_CHOICES)
    if current not in choices and "w_model_b" not in st.session_state and current:
        say("warning", f"The link's model_b={current!r} is not one of {', '.join(choices)}; comparing with "
                       f"{choices[-1]}.")
    seed("w_model_b", current if current in choices else choices[-1])
    if st.session_state["w_model_b"] not in choices:
        st.session_state["w_model_b"] = choices[-1]
    return st.selectbox("Second model", choices, key="w_model_b")


def comparison(view: ViewState, lm, keys: list[str]):
    """The right-hand side of a comparison: (what it is, analysis, panels, model, session) with the same maps, layer
    and head as the left (clamped to the second model's size, with a note), or None after a message."""
    from . import data

    if view.compare == "text":
        if not view.text_b.strip():
            st.info("Type the second text in the sidebar to compare.")
            return None
        lm_b, text, pair, name = lm, view.text_b, "", "the second text"
    else:
        lm_b = load_model(view.model_b)
        if lm_b is None:
            return None
        text, pair, name = view.text, view.pair, lm_b.name
    session = session_for(lm_b, text, pair)
    if session is None:
        return None
    placement_ok = [k for k in keys if k in registry.all_keys(lm_b.spec.placement)]
    b = get_maps(session, placement_ok)
    if b is None:
        return None
    layer = min(view.layer, lm_b.n_layers - 1)
    head = clamp_head(view.head, lm_b)
    if (layer, head) != (view.layer, view.head):
        st.caption(plain(f"{name} has {lm_b.n_layers} layers × {lm_b.n_heads} heads: its side shows layer {layer}"
                         + ("" if head is None else f", head {head}") + ".", None))
    panels = data.build_panels(b, [k for k in placement_ok if k in b], layer, head, view.hide_special, view.values)
    return name, b, panels, lm_b, session


def transformed_norms_of(session, layer: int):
    """``normviz.transformed_norms(session, layer)``, computed once per session and layer (ui.memo)."""
    from .memo import memoised

    return memoised(session, ("fx", layer), lambda: normviz.transformed_norms(session, layer))


def fx_norms(session, layer: int):
    """‖f^h(x_j)‖ of one layer ([H, n], ``normviz.transformed_norms``) from the session's records, or None
    (after a caption) when they cannot be had."""
    try:
        return transformed_norms_of(session, layer)
    except Exception as exc:  # never a traceback: the strip is an extra
        st.caption(plain(f"The ‖f(x)‖ strip is not available: {type(exc).__name__}: {shorten_error(exc)}", None))
        return None


def outline_token(fig, k: int, n: int) -> None:
    """Outline row and column ``k`` (of ``n`` shown) of a heatmap: the focused token in every panel."""
    line = dict(color="#ff3b30", width=2)
    fig.add_shape(type="rect", x0=-0.5, x1=n - 0.5, y0=k - 0.5, y1=k + 0.5, line=line)
    fig.add_shape(type="rect", x0=k - 0.5, x1=k + 0.5, y0=-0.5, y1=n - 0.5, line=line)


def view_html(figures: list, captions: list[str], model: str, view: ViewState):
    """The current view as one offline HTML page (plotly.js embedded), built only when the button is clicked."""
    from normviz import viz

    figs, caps = list(figures), list(captions)
    where = f"layer {view.layer}" + ("" if view.head is None else f", head {view.head}")
    description = f"{model} · {where} · text: {view.text}" + (f" ‖ {view.pair}" if view.pair else "")

    def build() -> bytes:
        return viz.standalone_html(figs, title="normviz", description=description, captions=caps,
                                   config=viz.plotly_config(filename="normviz")).encode("utf-8")
    return build


def clamp_head(head: int | None, lm) -> int | None:
    return head if head is None or head < lm.n_heads else lm.n_heads - 1


_WIDTH_JS = """
export default function(component) {
  const { setStateValue, data } = component;
  const measure = () => {
    const el = document.querySelector('[data-testid="stMainBlockContainer"]');
    const w = Math.round((el ? el.clientWidth : window.innerWidth) / 40) * 40;
    if (w > 0 && w !== (data && data.known)) { setStateValue("width", w); }
  };
  measure();
  let t = null;
  const onResize = () => { clearTimeout(t); t = setTimeout(measure, 400); };
  window.addEventListener("resize", onResize);
  return () => window.removeEventListener("resize", onResize);
}
"""
_width_component = None


def main_width() -> int | None:
    """The width in px of the page's main column, measured in the browser (to 40 px) by a tiny script
    component and kept for the session; None until it has reported (and under AppTest, which runs no JS).
    Panels are sized from it so that two fill a row at any screen width."""
    global _width_component
    ss = st.session_state
    known = ss.get("_normviz_width")
    try:
        if _width_component is None:
            import streamlit.components.v2 as components

            _width_component = components.component("normviz_main_width", js=_WIDTH_JS, isolate_styles=False)
        with st.sidebar:
            result = _width_component(key="nv_main_width", data={"known": known}, on_width_change=lambda: None)
        width = getattr(result, "width", None)
    except Exception:  # no components v2 (older Streamlit): the figures' own default size
        width = None
    if isinstance(width, (int, float)) and 200 <= width <= 8000:
        ss["_normviz_width"] = int(width)
    return ss.get("_normviz_width")


def panel_width(per_row: int, present: bool) -> int | None:
    """The px width one of ``per_row`` panels gets (columns with a medium gap), or None when unknown."""
    w = main_width()
    if w is None:
        return 820 if present else None
    gap = 24
    return max(260, int((w - gap * (per_row - 1)) / per_row) - 8)


# --- instant layer/head switching ---------------------------------------------------------------------------

_INSTANT_JS = """
export default function(component) {
  const S = (window.__normvizInstant = window.__normvizInstant || {});
  const data = component.data || {};
  if (data.frames_json !== S.raw) {  // parsed once per new set of frames, not per rerun
    S.raw = data.frames_json;
    S.frames = data.frames_json ? JSON.parse(data.frames_json) : {};
  }
  S.data = data;
  if (!S.installed) {
    S.installed = true;
    const current = () => {  // the layer slider's and the head box's values as a frame name, or null
      const slider = document.querySelector('.st-key-w_layer input[type="range"]');
      const box = document.querySelector('.st-key-w_head input');
      if (!slider || !box || box.getAttribute('aria-expanded') === 'true') return null;
      const layer = parseInt(slider.value, 10);
      const m = /^head (\\d+)$/.exec(box.value.trim());
      const head = m ? parseInt(m[1], 10) : (box.value.trim() === 'all heads' ? -1 : null);
      return Number.isNaN(layer) || head === null ? null : layer + ':' + head;
    };
    S.check = () => {
      const d = S.data, P = window.Plotly, name = current();
      if (!d.enabled || !P || !name) return;
      const todo = [];
      for (const [chart, frames] of Object.entries(S.frames || {})) {
        const gd = document.querySelector('.st-key-' + chart + ' .js-plotly-plot');
        const f = frames[name];
        if (!gd || !gd.data || !gd.layout || !f) return;  // a chart without this frame: the server draws it
        const meta = gd.layout.meta || (gd.layout.meta = {});
        if (meta.frame !== name) todo.push([gd, meta, f]);  // meta.frame: what the chart shows now
      }
      for (const [gd, meta, f] of todo) {
        meta.frame = name;
        P.update(gd, f.restyle, {'title.text': '<b>' + f.title + '</b>'}, [0]);  // bold, as Streamlit's theme
      }
    };
    let queued = false;
    new MutationObserver(() => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; S.check(); });
    }).observe(document.body, {subtree: true, childList: true, characterData: true, attributes: true,
                                attributeFilter: ['value', 'aria-valuetext', 'aria-expanded']});
  }
  S.check();
  return () => { S.data = {}; S.frames = {}; S.raw = undefined; };  // unmounted (another page)
}
"""
_instant_component = None


def instant_switch(frames: str | None) -> None:
    """Let the browser redraw the panels for a new layer or head as soon as the control moves, from
    ``frames`` (JSON of {chart key: {frame name: frame}}, :mod:`normviz.ui.frames`); the rerun that follows draws
    the same view from the server. ``None``: every change waits for the server (lines view, comparisons,
    panels that depend on the layer but have no frames, or a view too large for the frame budget)."""
    global _instant_component
    st.session_state["_normviz_instant"] = frames  # what the browser was given (read by the tests)
    try:
        if _instant_component is None:
            import streamlit.components.v2 as components

            _instant_component = components.component("normviz_instant", js=_INSTANT_JS, isolate_styles=False)
        _instant_component(key="nv_instant", data={"enabled": bool(frames), "frames_json": frames or ""})
    except Exception as exc:  # no components v2 (older Streamlit): the server draws every change
        print(f"normviz: instant switching off ({type(exc).__name__}: {exc})", file=sys.stderr)


def instant_frames(analysis, view: ViewState, keys: list[str], n_shown: int, lm, session=None,
                   fx_panels: dict[str, list[int]] | None = None) -> str | None:
    """The frames of Explore's panels (``panel_<key>`` charts of ``n_shown`` tokens, and ``fx_<key>`` strips:
    ``fx_panels`` maps a key to its shown positions) for :func:`instant_switch`, kept for the session while
    the text, maps and drawing options stay the same, as JSON; None when none fit the budget."""
    from . import data, frames

    heads = [h for h in [None] + list(range(lm.n_heads))
             if data.dedupe_all_heads([k for k in view.maps if k in analysis], h)[0] == keys]
    wanted = frames.plan(n_shown, len(keys), lm.n_layers, heads, view.layer, view.head)
    if not wanted:
        return None
    ident = (lm.name, view.text, view.pair, tuple(keys), view.hide_special, view.values, view.shared_scale,
             view.threshold, tuple(wanted), tuple(sorted(fx_panels or {})))
    kept = st.session_state.get("_normviz_frames")
    if kept is not None and kept[0] == ident:
        return kept[1]
    got = frames.panel_frames(analysis, keys, wanted, hide_special=view.hide_special, values=view.values,
                              shared_scale=view.shared_scale, threshold=view.threshold, causal=lm.is_causal)
    out = {f"panel_{k}": v for k, v in got.items()}
    for k, keep in (fx_panels or {}).items():
        out[f"fx_{k}"] = frames.fx_frames(lambda layer: transformed_norms_of(session, layer), keep, wanted)
    try:  # kept as one JSON string: a fraction of the lists' memory, and parsed in the browser once
        text = json.dumps(out, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a range that is not a number (an empty panel): the server draws every change
        text = None
    st.session_state["_normviz_frames"] = (ident, text)
    return text
