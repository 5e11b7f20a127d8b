"""Streamlit glue shared by the pages: shared caches, the view in the URL, the sidebar, loading with progress.

Pages stay thin: they read widgets, call :func:`load_model` / :func:`load_analysis` and place figures built
by :mod:`normviz.viz`. Errors meant for users (``normviz.errors.NormvizError``) become ``st.error`` boxes.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace

import streamlit as st

import normviz
from normviz.errors import NormvizError, TooCostlyError, TruncationWarning
from normviz.analysis import resolve_keys
from normviz.methods import registry

from . import data
from .cache import BoundedCache
from .state import ViewState, check_model_allowed, model_allowlist, token_cap

VIEW = "_normviz_view"
EMBEDDED_CHOICES = ["minilm", "smollm2"]
OTHER = "Other (Hub id or local path)…"
ANALYSIS_ENTRIES = 24


@st.cache_resource(show_spinner=False)
def model_cache() -> BoundedCache:
    """Loaded models, shared by every session and never mutated (at most 3 kept)."""
    return BoundedCache(3)


@st.cache_resource(show_spinner=False)
def analysis_cache() -> BoundedCache:
    """Analyses keyed on (model source, revision, device, dtype, text, pair, token cap, maps)."""
    return BoundedCache(ANALYSIS_ENTRIES)


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


@dataclass
class Result:
    analysis: object | None
    errors: dict[str, str] = field(default_factory=dict)  # key -> message for maps that could not be computed
    notes: list[str] = field(default_factory=list)


def _analysis_key(lm, text: str, pair: str, cap: int, keys: tuple[str, ...]):
    return lm.cache_key + (text, pair, cap, keys)


def _compute(lm, text: str, pair: str | None, cap: int, keys: list[str], progress) -> Result:
    """One analysis; normviz itself serialises analyses of a shared model (its hooks are per model)."""
    notes: list[str] = []
    errors: dict[str, str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TruncationWarning)
        try:
            a = normviz.analyze(lm, text, pair or None, methods=keys, max_tokens=cap, progress=progress)
        except TooCostlyError:
            # one costly map must not take the others down: compute method by method
            a = None
            by_method: dict[str, list[str]] = {}
            for k in keys:
                by_method.setdefault(registry.lookup(k)[0].name, []).append(k)
            for ks in by_method.values():
                try:
                    part = normviz.analyze(lm, text, pair or None, methods=ks, max_tokens=cap)
                except TooCostlyError as exc:
                    for k in ks:
                        errors[k] = str(exc)
                    continue
                if a is None:
                    a = part
                else:
                    a.arrays.update(part.arrays)
            if a is None:
                raise TooCostlyError(next(iter(errors.values())))
    for w in caught:
        if issubclass(w.category, TruncationWarning):
            notes.append(f"{w.message} Set NORMVIZ_MAX_TOKENS to change the limit.")
    return Result(a, errors, notes)


def _ff_too_costly(lm, text: str, pair: str, cap: int, keys: list[str]) -> str | None:
    """On a CPU, refuse feed-forward maps that would take minutes (NORMVIZ_FF_BUDGET seconds, default 60)."""
    if lm.device.type != "cpu":
        return None
    try:  # what the keys need, e.g. a rollout of ff_res needs the FF maps
        needed = set(resolve_keys(lm, keys))
    except NormvizError:
        needed = set(keys)
    if not needed & data.FF_KEYS:
        return None
    try:
        budget = float(os.environ.get("NORMVIZ_FF_BUDGET", "60"))
    except ValueError:
        budget = 60.0
    cfg = lm.config
    d = getattr(cfg, "hidden_size", None) or getattr(cfg, "n_embd", None) or getattr(cfg, "dim", 768)
    d_ff = getattr(cfg, "intermediate_size", None) or getattr(cfg, "n_inner", None) or getattr(cfg, "hidden_dim", None) or 4 * d
    gated = lm.spec.ff_kind == "gated"
    n = min(cap, len(lm.tokenizer(text, pair or None)["input_ids"]))
    est = data.ff_seconds_estimate(n, lm.n_layers, d, d_ff, gated)
    if est <= budget:
        return None
    limit = data.ff_token_limit(budget, lm.n_layers, d, d_ff, gated)
    return (f"The feed-forward maps of {lm.name} for {n} tokens would take about {est / 60:.0f} min on this CPU. "
            f"Shorten the text to about {limit} tokens, pick maps without the feed-forward block, or raise "
            "NORMVIZ_FF_BUDGET (seconds).")


def _groups(lm, keys: list[str]) -> list[list[str]]:
    """The registry methods behind ``keys`` (always attention and norm first), each with all its keys."""
    placement = lm.spec.placement
    names = ["attention", "norm"]
    for k in keys:
        try:
            name = registry.lookup(k)[0].name
        except NormvizError:
            continue
        if name not in names:
            names.append(name)
    methods = registry.methods()
    out = []
    for name in names:
        if name not in methods:
            continue
        ks = [i.key for i in methods[name].keys if placement in i.placements]
        if methods[name].scope == "model":  # cross-layer maps: only those asked for (each may need costly inputs)
            ks = [k for k in ks if k in keys]
        if ks:
            out.append(ks)
    return out


def analysis_for(lm, text: str, pair: str, wanted: list[str]) -> tuple[Result | None, dict[str, str]]:
    """One analysis holding the attention and norm maps plus the maps in ``wanted``.

    Each registry method is computed (and cached) on its own, so asking for a feed-forward map computes the
    FF block once, layer/head changes only slice cached arrays, and a map that is too costly says so in its
    place while the rest still shows. None (after an error box) when even the base maps cannot be computed.
    """
    cap = token_cap()
    cache = analysis_cache()
    base: Result | None = None
    errors: dict[str, str] = {}
    extra: dict[str, object] = {}
    for ks in _groups(lm, wanted):
        key = _analysis_key(lm, text, pair, cap, tuple(ks))
        if key not in cache:
            refuse = _ff_too_costly(lm, text, pair, cap, ks)
            if refuse:
                errors.update({k: refuse for k in ks})
                continue
        bar = st.empty() if key not in cache else None
        try:
            if bar is not None:
                prog = bar.progress(0.0, text=f"Analysing ({', '.join(ks)})…")
                res = cache.get_or_compute(key, lambda: _compute(
                    lm, text, pair, cap, ks, lambda f, m: prog.progress(min(1.0, f), text=f"{', '.join(ks)}: {m}")))
                bar.empty()
            else:
                res = cache.get(key)
        except NormvizError as exc:
            if bar is not None:
                bar.empty()
            if base is None and "attention" in ks:
                st.error(str(exc))
                return None, errors
            errors.update({k: str(exc) for k in ks})
            continue
        except Exception as exc:  # never a traceback in the page
            if bar is not None:
                bar.empty()
            if base is None and "attention" in ks:
                st.error(f"The analysis failed: {type(exc).__name__}: {exc}")
                return None, errors
            errors.update({k: f"{type(exc).__name__}: {exc}" for k in ks})
            continue
        errors.update(res.errors)
        if base is None:
            base = res
        elif res.analysis is not None:
            extra.update({k: v for k, v in res.analysis.arrays.items() if k not in base.analysis.arrays})
    if base is None or base.analysis is None:
        return None, errors
    if extra:  # a shallow copy: cached analyses are shared by sessions and stay as they were
        base = Result(replace(base.analysis, arrays={**base.analysis.arrays, **extra}), base.errors, base.notes)
    return base, errors


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
